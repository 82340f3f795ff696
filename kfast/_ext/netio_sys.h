/* Platform layer of the netio kernel: the syscalls whose spelling differs
 * between Linux and the BSDs/macOS.
 *
 * kfast_sendfile(sock, file, offset, count, &copied)
 *     Send up to `count` bytes of `file` starting at `offset` to the socket.
 *     Returns the number of bytes sent (> 0), 0 if the file ends at `offset`
 *     (it was truncated under us), or -1 with errno set (EAGAIN when the
 *     socket buffer is full). Sets `copied` to 1 when the bytes went through
 *     user space (the fallback), 0 when they did not, so byte counters tell
 *     the two apart.
 *     Linux: sendfile(2), the bytes go page cache -> socket without a copy
 *     through user space. Elsewhere (macOS/BSD have a different sendfile
 *     signature and semantics for partial sends on non-blocking sockets), and
 *     on Linux for files whose filesystem cannot splice (sendfile fails with
 *     EINVAL/ENOSYS), the documented fallback is pread(2) into a stack buffer
 *     + send(2): correct on any POSIX system, just not zero-copy.
 *     KFAST_HAVE_SENDFILE says whether the zero-copy path was compiled in.
 *
 * kfast_sendmsg_flags(more)
 *     Flags for sendmsg(2) of in-memory parts: never raise SIGPIPE (a client
 *     that vanished must surface as EPIPE, not kill the process), and on
 *     Linux MSG_MORE when a file region follows so a response header and the
 *     first records leave in one TCP segment despite TCP_NODELAY.
 */
#ifndef KFAST_NETIO_SYS_H
#define KFAST_NETIO_SYS_H

#include <errno.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <unistd.h>

#if defined(MSG_NOSIGNAL)
#define KFAST_MSG_NOSIGNAL MSG_NOSIGNAL
#else
/* macOS: no MSG_NOSIGNAL; the network layer sets SO_NOSIGPIPE on each
 * accepted socket instead (and CPython ignores SIGPIPE anyway). */
#define KFAST_MSG_NOSIGNAL 0
#endif

#define KFAST_SENDFILE_FALLBACK_CHUNK 65536

static ssize_t kfast_pread_send(int sock_fd, int file_fd, int64_t offset, size_t count)
{
    char chunk[KFAST_SENDFILE_FALLBACK_CHUNK];
    ssize_t got;
    if (count > sizeof(chunk))
        count = sizeof(chunk);
    do {
        got = pread(file_fd, chunk, count, (off_t)offset);
    } while (got < 0 && errno == EINTR);
    if (got <= 0)
        return got;
    /* A short send is fine: the caller resumes at offset + sent and reads
     * the rest again, so nothing read but unsent is lost. */
    return send(sock_fd, chunk, (size_t)got, KFAST_MSG_NOSIGNAL);
}

/* KFAST_NO_SENDFILE forces the portable fallback (its tests build it on
 * Linux that way). */
#if defined(__linux__) && !defined(KFAST_NO_SENDFILE)
#include <sys/sendfile.h>
#define KFAST_HAVE_SENDFILE 1

static ssize_t kfast_sendfile(int sock_fd, int file_fd, int64_t offset, size_t count,
                              int *copied)
{
    off_t off = (off_t)offset;
    ssize_t sent = sendfile(sock_fd, file_fd, &off, count);
    if (sent < 0 && (errno == EINVAL || errno == ENOSYS)) {
        *copied = 1;
        return kfast_pread_send(sock_fd, file_fd, offset, count);
    }
    *copied = 0;
    return sent;
}

#else
#define KFAST_HAVE_SENDFILE 0

static ssize_t kfast_sendfile(int sock_fd, int file_fd, int64_t offset, size_t count,
                              int *copied)
{
    *copied = 1;
    return kfast_pread_send(sock_fd, file_fd, offset, count);
}
#endif

/* iovecs per sendmsg(2): the platform's IOV_MAX (1024 on Linux and macOS),
 * at most 1024 (the size of the caller's stack array). */
#include <limits.h>
#if defined(IOV_MAX) && IOV_MAX < 1024
#define KFAST_IOV_MAX IOV_MAX
#else
#define KFAST_IOV_MAX 1024
#endif

#if defined(MSG_MORE)
#define KFAST_MSG_MORE MSG_MORE
#else
#define KFAST_MSG_MORE 0
#endif

static int kfast_sendmsg_flags(int more)
{
    return KFAST_MSG_NOSIGNAL | (more ? KFAST_MSG_MORE : 0);
}

#endif /* KFAST_NETIO_SYS_H */
