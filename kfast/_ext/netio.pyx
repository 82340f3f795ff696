"""Plaintext socket I/O for the broker: framed receives, zero-copy sends.

See netio.pxd for the framing grammar and the buffer ownership rules. This
module does syscalls on a non-blocking socket fd and manages buffers; it has
no event loop, no config and no logging: kfast.server.network decides when to
call receive()/flush() (add_reader/add_writer) and what to do on errors.
"""
cimport cython
from cpython.buffer cimport (PyBUF_FORMAT, PyBUF_ND, PyBUF_SIMPLE,
                             PyBUF_STRIDES, PyBuffer_Release,
                             PyObject_CheckBuffer, PyObject_GetBuffer)
from cpython.mem cimport PyMem_Free, PyMem_RawFree, PyMem_RawMalloc, PyMem_Realloc
from cpython.object cimport PyObject_AsFileDescriptor
from libc.errno cimport EAGAIN, EINTR, errno
from libc.stdint cimport int32_t, int64_t, uint32_t
from libc.string cimport memcpy, memmove, memset
from posix.uio cimport iovec

import os as _os
from time import perf_counter as _perf_counter

cdef extern from "<sys/socket.h>" nogil:
    struct msghdr:
        void* msg_name
        unsigned int msg_namelen
        iovec* msg_iov
        size_t msg_iovlen
        void* msg_control
        size_t msg_controllen
        int msg_flags
    ssize_t recv(int fd, void* buf, size_t n, int flags)
    ssize_t sendmsg(int fd, const msghdr* msg, int flags)

cdef extern from "<errno.h>" nogil:
    int EWOULDBLOCK

cdef extern from "Python.h":
    object PyMemoryView_FromObject(object obj)

cdef extern from *:
    # Set by setup.py (KFAST_DEBUG=1 builds): the invariant checks below
    # compile to nothing in release builds.
    int KFAST_DEBUG


HAVE_SENDFILE = bool(KFAST_HAVE_SENDFILE)
# PlaintextTransport.answer_frames' outcomes (see its docstring).
cdef enum:
    _NONE, _SENT, _UNSENT, _LEFT, _FAILED, _INVALID, _SEND_FAILED
ANSWER_NONE = _NONE
ANSWER_SENT = _SENT
ANSWER_UNSENT = _UNSENT
ANSWER_LEFT = _LEFT
ANSWER_FAILED = _FAILED
ANSWER_INVALID = _INVALID
ANSWER_SEND_FAILED = _SEND_FAILED
RECEIVE_CHUNK_SIZE = DEFAULT_RECEIVE_CHUNK
# The size prefix is an int32, so a frame body can be at most this long.
MAX_FRAME_SIZE = 0x7FFFFFFF

class InvalidReceiveException(Exception):
    """A frame's size prefix is negative or above the receive limit.

    Kafka's name (org.apache.kafka.common.network.InvalidReceiveException):
    the broker closes the connection, it does not answer.
    """


cdef inline int _raise_errno(int err) except -1:
    raise OSError(err, _os.strerror(err))


@cython.final
cdef class ReceiveChunk:
    """One allocation of the receive buffer; exports writable slices of itself.

    Only PlaintextTransport creates chunks. `exports` counts live buffer
    exports (memoryviews handed out as frames and anything derived from
    them); while it is non-zero the transport never moves or reuses bytes
    before its read position.
    """

    def __cinit__(self, Py_ssize_t capacity):
        if capacity < 1:
            capacity = 1
        self.data = <char*>PyMem_RawMalloc(<size_t>capacity)
        if self.data == NULL:
            raise MemoryError()
        self.capacity = capacity
        self.exports = 0
        self.export_offset = 0
        self.export_length = 0

    def __dealloc__(self):
        PyMem_RawFree(self.data)
        self.data = NULL

    def __getbuffer__(self, Py_buffer* buffer, int flags):
        if self.export_offset < 0 or self.export_length < 0 or \
                self.export_offset + self.export_length > self.capacity:
            raise BufferError("ReceiveChunk export range out of bounds")
        buffer.buf = self.data + self.export_offset
        buffer.obj = self
        buffer.len = self.export_length
        buffer.readonly = 0
        buffer.itemsize = 1
        buffer.format = NULL
        if (flags & PyBUF_FORMAT) == PyBUF_FORMAT:
            buffer.format = <char*>"B"
        buffer.ndim = 1
        buffer.shape = NULL
        if (flags & PyBUF_ND) == PyBUF_ND:
            buffer.shape = &buffer.len
        buffer.strides = NULL
        if (flags & PyBUF_STRIDES) == PyBUF_STRIDES:
            buffer.strides = &buffer.itemsize
        buffer.suboffsets = NULL
        buffer.internal = NULL
        self.exports += 1

    def __releasebuffer__(self, Py_buffer* buffer):
        self.exports -= 1
        if self.exports == 0 and self.retired:
            self.retired = False
            _pool_put(self)

    @property
    def live_exports(self):
        return self.exports


# The receive pool: chunks larger than DEFAULT_RECEIVE_CHUNK that no
# transport receives into and no frame view holds, kept for the next large
# frame of any connection, at most _pool_limit bytes together. Why: a 1 MB
# produce request otherwise costs a fresh allocation, grown by doubling (each
# step a copy of what arrived) and page-faulted in as recv(2) fills it --
# measured at a third of the broker's CPU under librdkafka-sized batches
# (bench/README.md). Reusing memory a frame that did arrive once allocated
# keeps the rule that no length field alone makes the broker allocate.
# Touched only with the GIL held (transports live on the event loop; a
# frame view may be released on any thread).
cdef list _pool = []
cdef Py_ssize_t _pool_bytes = 0
cdef Py_ssize_t _pool_limit = RECEIVE_POOL_BYTES


cdef void _pool_put(ReceiveChunk chunk) noexcept:
    global _pool_bytes
    if chunk.capacity <= DEFAULT_RECEIVE_CHUNK or _pool_bytes + chunk.capacity > _pool_limit:
        return  # freed with its last reference
    try:
        _pool.append(chunk)
    except MemoryError:
        return
    _pool_bytes += chunk.capacity


cdef ReceiveChunk _pool_take(Py_ssize_t need):
    """The smallest pooled chunk of at least ``need`` bytes, or None."""
    global _pool_bytes
    cdef Py_ssize_t i, best = -1, n = len(_pool)
    cdef ReceiveChunk chunk
    for i in range(n):
        chunk = <ReceiveChunk>_pool[i]
        if chunk.capacity >= need and (best < 0 or chunk.capacity < (<ReceiveChunk>_pool[best]).capacity):
            best = i
    if best < 0:
        return None
    chunk = <ReceiveChunk>_pool[best]
    _pool[best] = _pool[n - 1]
    del _pool[n - 1]
    _pool_bytes -= chunk.capacity
    return chunk


cdef void _retire(ReceiveChunk chunk) noexcept:
    """A transport stops receiving into ``chunk``: pool it now, or once the
    frames still viewing it are released."""
    if chunk is None or chunk.capacity <= DEFAULT_RECEIVE_CHUNK:
        return
    if chunk.exports == 0:
        _pool_put(chunk)
    else:
        chunk.retired = True


def receive_pool():
    """(chunks, bytes) held by the receive pool."""
    return len(_pool), _pool_bytes


def set_receive_pool_limit(Py_ssize_t limit):
    """Bytes the receive pool may hold (RECEIVE_POOL_BYTES by default; 0
    turns reuse off). Chunks over the new limit are freed."""
    global _pool_limit, _pool_bytes
    _pool_limit = limit if limit > 0 else 0
    while _pool and _pool_bytes > _pool_limit:
        _pool_bytes -= (<ReceiveChunk>_pool.pop()).capacity


@cython.final
@cython.freelist(64)
cdef class SendPart:
    """One queued piece of a response: memory (a held buffer export, or
    owned copies of small parts) or a file region (position/remaining in
    the file). `position`/`remaining` advance as bytes leave."""

    def __dealloc__(self):
        if self.has_view:
            PyBuffer_Release(&self.view)
            self.has_view = False
        PyMem_Free(self.owned)
        self.owned = NULL

    cdef void release(self):
        if self.has_view:
            PyBuffer_Release(&self.view)
            self.has_view = False
        PyMem_Free(self.owned)
        self.owned = NULL
        self.base = NULL
        self.region = None

    cdef int append(self, const char* data, Py_ssize_t length) except -1:
        cdef Py_ssize_t capacity
        cdef char* grown
        if self.owned_length + length > self.owned_capacity:
            capacity = 2 * self.owned_capacity
            if capacity < self.owned_length + length:
                capacity = self.owned_length + length
            if capacity < 256:
                capacity = 256
            grown = <char*>PyMem_Realloc(self.owned, <size_t>capacity)
            if grown == NULL:
                raise MemoryError()
            self.owned = grown
            self.owned_capacity = capacity
        memcpy(self.owned + self.owned_length, data, <size_t>length)
        self.owned_length += length
        self.base = self.owned
        self.remaining = self.owned_length
        return 0


cdef SendPart _held_part(object obj):
    cdef SendPart part = SendPart.__new__(SendPart)
    PyObject_GetBuffer(obj, &part.view, PyBUF_SIMPLE)
    part.has_view = True
    part.base = <const char*>part.view.buf
    part.position = 0
    part.remaining = part.view.len
    return part


cdef SendPart _file_part(object obj):
    cdef SendPart part = SendPart.__new__(SendPart)
    cdef int64_t position, length
    # A FileRegion (kfast.protocol.file_region), recognised by shape: this
    # kernel sits below the protocol layer and must not import it.
    try:
        file = obj.file
        position = obj.position
        length = obj.length
    except AttributeError:
        raise TypeError(
            f"a response part must be bytes-like or a FileRegion, not {type(obj).__name__}"
        ) from None
    if position < 0 or length < 0:
        raise ValueError(f"invalid file region {obj!r}")
    PyObject_AsFileDescriptor(file)  # fail now, not mid-response, if it is closed
    part.is_file = True
    part.region = obj
    part.position = position
    part.remaining = length
    return part


@cython.final
cdef class PlaintextTransport:
    """Framed, non-blocking I/O on one connected TCP socket.

    Receive: call receive() when the socket is readable, then next_frame()
    until it returns None. Send: send(parts) queues a response (this layer
    writes its 4-byte size prefix from the parts' total length), flush()
    pushes as much as the socket takes; when it returns False, call flush()
    again once the socket is writable.

    ``max_receive_size`` is the largest frame body accepted (the broker
    passes socket.request.max.bytes). The fd stays owned by the caller (a
    socket object); close() only drops the queued parts (releasing buffers
    and file regions) and the buffer.
    """

    def __cinit__(self, int fd, Py_ssize_t max_receive_size):
        if fd < 0:
            raise ValueError("fd must be >= 0")
        if max_receive_size < 0 or max_receive_size > MAX_FRAME_SIZE:
            raise ValueError("max_receive_size must be in [0, 2**31 - 1]")
        self.fd = fd
        self.closed = False
        self.max_receive_size = max_receive_size
        self.chunk = ReceiveChunk(DEFAULT_RECEIVE_CHUNK)
        self.start = 0
        self.end = 0
        self.parts = []
        self.head = 0
        self.unsent_bytes = 0

    cdef int _check_invariants(self) except -1:
        cdef int64_t queued = 0
        cdef SendPart part
        if self.closed:
            return 0
        assert 0 <= self.start <= self.end <= self.chunk.capacity, "receive buffer bounds"
        assert self.chunk.exports >= 0, "negative export count"
        for i in range(self.head, len(self.parts)):
            part = <SendPart>self.parts[i]
            assert part.remaining > 0, "empty part queued"
            queued += part.remaining
        assert queued == self.unsent_bytes, "unsent_bytes out of step with the queue"
        return 0

    # ------------------------------------------------------------------ receive

    cdef Py_ssize_t _frame_size(self) except -2:
        """Body size of the frame at the read position, -1 if its size prefix
        is not complete yet. Raises InvalidReceiveException as Kafka's
        NetworkReceive does, before any of the body is accounted for."""
        cdef const unsigned char* p
        cdef int32_t size
        if self.end - self.start < FRAME_HEADER:
            return -1
        p = <const unsigned char*>self.chunk.data + self.start
        size = <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) |
                         (<uint32_t>p[2] << 8) | <uint32_t>p[3])
        if size < 0:
            raise InvalidReceiveException(f"Invalid receive (size = {size})")
        if size > self.max_receive_size:
            raise InvalidReceiveException(
                f"Invalid receive (size = {size} larger than {self.max_receive_size})")
        return size

    cdef int _make_room(self) except -1:
        """Ensure free space after `end` for the next recv.

        Growth is bounded by what has arrived: a chunk grows to at most
        twice the bytes already received for the pending frame (never to
        the size its prefix merely claims), so a client announcing 100 MB
        and sending 10 bytes costs one default chunk.
        """
        cdef ReceiveChunk chunk = self.chunk
        cdef ReceiveChunk fresh
        cdef Py_ssize_t avail = self.end - self.start
        cdef Py_ssize_t size, want, need, target
        if avail == 0:
            if chunk.exports == 0:
                self.start = self.end = 0
                if chunk.capacity > DEFAULT_RECEIVE_CHUNK:
                    # Shrink back after a large frame (the large chunk is pooled).
                    _retire(chunk)
                    self.chunk = ReceiveChunk(DEFAULT_RECEIVE_CHUNK)
                return 0
            if chunk.capacity - self.end >= MIN_TAIL_ROOM:
                return 0
            _retire(chunk)
            self.chunk = ReceiveChunk(DEFAULT_RECEIVE_CHUNK)
            self.start = self.end = 0
            return 0
        if self.end < chunk.capacity:
            return 0
        # Full: compact, or move the unread bytes to a new (larger) chunk.
        size = self._frame_size()
        want = FRAME_HEADER if size < 0 else FRAME_HEADER + size
        need = avail + 1
        target = want if want < 2 * avail else 2 * avail
        if target < DEFAULT_RECEIVE_CHUNK:
            target = DEFAULT_RECEIVE_CHUNK
        if target < need:
            target = need
        if chunk.exports == 0 and target <= chunk.capacity:
            memmove(chunk.data, chunk.data + self.start, <size_t>avail)
        else:
            # A pooled chunk holding the whole frame (memory allocated
            # already), else one of the bounded growth step.
            fresh = _pool_take(want if want > target else target)
            if fresh is None:
                fresh = _pool_take(target)
            if fresh is None:
                fresh = ReceiveChunk(target)
            memcpy(fresh.data, chunk.data + self.start, <size_t>avail)
            _retire(chunk)
            self.chunk = fresh
        self.start = 0
        self.end = avail
        return 0

    def receive(self):
        """One recv(2) into the receive buffer.

        Returns the number of bytes read (> 0), 0 when the peer closed its
        side, -1 when nothing is available (EAGAIN). Raises OSError for
        socket errors (ECONNRESET...) and InvalidReceiveException when a
        buffered size prefix is invalid.
        """
        cdef ssize_t n
        cdef int err
        if self.closed:
            raise ValueError("transport is closed")
        self._make_room()
        while True:
            n = recv(self.fd, self.chunk.data + self.end,
                     <size_t>(self.chunk.capacity - self.end), 0)
            if n >= 0:
                break
            err = errno
            if err == EINTR:
                continue
            if err == EAGAIN or err == EWOULDBLOCK:
                return -1
            _raise_errno(err)
        self.end += n
        self.bytes_received += <uint64_t>n
        if KFAST_DEBUG:
            self._check_invariants()
        return n

    def next_frame(self):
        """The next complete frame's body as a writable memoryview, or None.

        The view stays valid for as long as it (or anything derived from it)
        is alive; release it (or drop it) to let the buffer be reused.
        Raises InvalidReceiveException for a negative or oversized size.
        """
        return self._cut_frame()

    cdef object _cut_frame(self):
        cdef Py_ssize_t size
        cdef ReceiveChunk chunk = self.chunk
        if self.closed:
            return None
        size = self._frame_size()
        if size < 0 or self.end - self.start - FRAME_HEADER < size:
            return None
        chunk.export_offset = self.start + FRAME_HEADER
        chunk.export_length = size
        frame = PyMemoryView_FromObject(chunk)
        self.start += FRAME_HEADER + size
        self.frames_received += 1
        return frame

    @property
    def buffered_receive_bytes(self):
        """Bytes received but not yet returned by next_frame()."""
        return self.end - self.start

    @property
    def receive_capacity(self):
        """Capacity of the current receive chunk (for tests and metrics)."""
        return self.chunk.capacity if self.chunk is not None else 0

    # --------------------------------------------------------------------- send

    def send(self, parts):
        """Queue one response: a 4-byte big-endian size prefix (the total
        length of `parts`) followed by `parts`.

        Each part is bytes-like or a FileRegion (sent with sendfile; the
        region object is held so its file stays open). A bytes-like part
        larger than COALESCE_MAX (512) bytes is held, not copied, until sent
        (so it must not change meanwhile); smaller ones are copied together
        with the size prefix and each other into one buffer. Nothing is
        queued if any part is invalid. Does not send anything: call flush().
        """
        self._stage(parts)

    cdef int _stage(self, object parts) except -1:
        cdef SendPart first, part
        cdef SendPart small  # the owned-copy part small parts go into now
        cdef Py_buffer view
        cdef Py_ssize_t length
        cdef int64_t total = 0
        cdef list staged
        cdef uint32_t size
        cdef char placeholder[4]
        if self.closed:
            raise ValueError("transport is closed")
        first = SendPart.__new__(SendPart)
        memset(placeholder, 0, 4)
        first.append(placeholder, FRAME_HEADER)
        small = first
        staged = [first]
        for obj in parts:
            if PyObject_CheckBuffer(obj):
                PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE)
                length = view.len
                if length <= COALESCE_MAX:
                    try:
                        if length and small is None:
                            small = SendPart.__new__(SendPart)
                            staged.append(small)
                        if length:
                            small.append(<const char*>view.buf, length)
                    finally:
                        PyBuffer_Release(&view)
                else:
                    PyBuffer_Release(&view)
                    part = _held_part(obj)
                    length = part.remaining
                    staged.append(part)
                    small = None
            else:
                part = _file_part(obj)
                length = part.remaining
                if length:
                    staged.append(part)
                    small = None
            total += length
            if total > MAX_FRAME_SIZE:
                raise ValueError("response larger than 2**31 - 1 bytes")
        size = <uint32_t>total
        first.owned[0] = <char>(size >> 24)
        first.owned[1] = <char>(size >> 16)
        first.owned[2] = <char>(size >> 8)
        first.owned[3] = <char>size
        self.parts.extend(staged)
        self.unsent_bytes += total + FRAME_HEADER
        self.responses_queued += 1
        if KFAST_DEBUG:
            self._check_invariants()
        return 0

    cdef void _pop_part(self):
        cdef SendPart part = <SendPart>self.parts[self.head]
        part.release()
        self.parts[self.head] = None
        self.head += 1
        if self.head == len(self.parts):
            del self.parts[:]
            self.head = 0
        elif self.head >= 256 and 2 * self.head >= len(self.parts):
            del self.parts[:self.head]
            self.head = 0

    cdef int _send_memory(self) except -2:
        """One sendmsg(2) of the run of memory parts at the head of the
        queue. Returns 1 on progress, 0 if the socket would block."""
        cdef iovec iov[IOV_BATCH]
        cdef msghdr msg
        cdef Py_ssize_t count = 0
        cdef Py_ssize_t i = self.head
        cdef Py_ssize_t n_parts = len(self.parts)
        cdef bint more = False
        cdef SendPart part
        cdef ssize_t sent
        cdef int err
        while i < n_parts and count < KFAST_IOV_MAX:
            part = <SendPart>self.parts[i]
            if part.is_file:
                more = True
                break
            iov[count].iov_base = <void*>(part.base + part.position)
            iov[count].iov_len = <size_t>part.remaining
            count += 1
            i += 1
        memset(&msg, 0, sizeof(msg))
        msg.msg_iov = iov
        msg.msg_iovlen = <size_t>count
        while True:
            sent = sendmsg(self.fd, &msg, kfast_sendmsg_flags(more))
            if sent >= 0:
                break
            err = errno
            if err == EINTR:
                continue
            if err == EAGAIN or err == EWOULDBLOCK:
                return 0
            _raise_errno(err)
        self.copied_bytes += <uint64_t>sent
        self.unsent_bytes -= sent
        while sent > 0:
            part = <SendPart>self.parts[self.head]
            if sent >= part.remaining:
                sent -= part.remaining
                part.remaining = 0
                self._pop_part()
            else:
                part.position += sent
                part.remaining -= sent
                sent = 0
        return 1

    cdef int _send_file(self, SendPart part) except -2:
        """One sendfile(2) from the file region at the head of the queue.
        Returns 1 on progress, 0 if the socket would block."""
        cdef size_t count = <size_t>part.remaining
        cdef ssize_t sent
        cdef int err
        cdef int file_fd
        cdef int copied = 0
        # Resolve the descriptor again: a file closed since send() must fail
        # here, not send whatever file now has its old number.
        file_fd = PyObject_AsFileDescriptor(part.region.file)
        if count > SENDFILE_MAX_CHUNK:
            count = SENDFILE_MAX_CHUNK
        while True:
            sent = kfast_sendfile(self.fd, file_fd, part.position, count, &copied)
            if sent >= 0:
                break
            err = errno
            if err == EINTR:
                continue
            if err == EAGAIN or err == EWOULDBLOCK:
                return 0
            _raise_errno(err)
        if sent == 0:
            # The frame's size prefix already promised these bytes; the
            # connection cannot be kept in sync, so the caller closes it.
            raise EOFError(
                f"{part.region!r}: file ends at {part.position} with "
                f"{part.remaining} bytes of the region unsent (truncated?)")
        if copied:
            self.copied_bytes += <uint64_t>sent
        else:
            self.sendfile_bytes += <uint64_t>sent
        self.unsent_bytes -= sent
        part.position += sent
        part.remaining -= sent
        if part.remaining == 0:
            self._pop_part()
        return 1

    def flush(self):
        """Send queued bytes until the queue is empty (returns True) or the
        socket would block (returns False: call again when writable).

        Raises OSError when the peer is gone (EPIPE, ECONNRESET) and
        EOFError when a file region's file is shorter than the region.
        """
        return self._flush_queue()

    cdef bint _flush_queue(self) except -1:
        cdef SendPart part
        if self.closed:
            raise ValueError("transport is closed")
        while self.head < len(self.parts):
            part = <SendPart>self.parts[self.head]
            if part.is_file:
                if self._send_file(part) == 0:
                    break
            elif self._send_memory() == 0:
                break
        if KFAST_DEBUG:
            self._check_invariants()
        return self.head == len(self.parts)

    @property
    def has_unsent(self):
        return self.head < len(self.parts)

    # ------------------------------------------------- one frame in, one answer out

    def attach(self, handler, connection, timed_type, timed, int64_t max_unsent):
        """Let answer_frames() call ``handler(connection, frame)``.

        ``timed_type`` is the network layer's TimedResponse: a list of parts
        with a ``timing`` whose ``sent(dequeued, now)`` is called once the
        response's last byte went to the socket (this kernel sits below that
        layer and must not import it); ``timed`` is the connection's queue
        of (end, dequeued, timing) entries of responses queued and not yet
        reported (a deque); ``max_unsent`` its max_queued_send_bytes.
        ``connection._reading`` is False once the connection takes no more
        requests (throttled, draining, closed). close() drops them all.
        """
        self._handler = handler
        self._connection = connection
        self._timed_type = timed_type
        self._timed = timed
        self._max_unsent = max_unsent

    def answer_frames(self):
        """The common case of a readable connection in C: each complete
        frame to the handler, its synchronous response queued; then one
        flush, and the send timing of what went out reported.

        The caller (kfast.server.network.Connection) calls it only when no
        request is in flight and nothing is timed (no earlier response to
        wait behind); it keeps every other rule. Frames are cut while the
        connection reads (``_reading``) and its unsent bytes are within
        ``max_unsent``, as in its general path. Returns:

        - ANSWER_NONE: nothing done (no complete frame buffered, or bytes
          of an earlier response still unsent);
        - ANSWER_SENT: every frame cut was answered (or needed no
          response) and every byte went to the socket, timings reported;
        - ANSWER_UNSENT: the socket took only part of the responses: their
          timing entries wait in ``timed`` for the caller's next flush;
        - ANSWER_LEFT: ``left`` is the last handler's response for the
          caller (not a list: an awaitable, a tuple, a wrong type; or the
          handler closed this transport), not queued;
        - ANSWER_FAILED: ``left`` is the exception the last handler raised;
        - ANSWER_INVALID: ``left`` is the exception a part of the last
          response raised (TypeError, ValueError, BufferError, OSError),
          nothing of it queued;
        - ANSWER_SEND_FAILED: ``left`` is the exception flushing raised
          (OSError, EOFError): the connection is not usable.

        After LEFT, FAILED and INVALID the responses queued before are not
        flushed yet (their entries are in ``timed``). InvalidReceiveException
        (a bad size prefix) propagates, as from next_frame(). After anything
        but ANSWER_SENT, or with frames still buffered, the caller's general
        path carries on.
        """
        cdef object frame, response, cls, entry
        cdef object timed = self._timed
        cdef bint answered = False
        cdef bint done
        cdef double now
        cdef int status = _SENT
        self.left = None
        if self.closed or self._handler is None or self.head < len(self.parts):
            return _NONE
        while True:
            if answered and (
                self.closed
                or self.unsent_bytes > self._max_unsent
                or not self._connection._reading
            ):
                break
            frame = self._cut_frame()
            if frame is None:
                if not answered:
                    return _NONE
                break
            answered = True
            try:
                response = self._handler(self._connection, frame)
            except Exception as exc:
                self.left = exc
                status = _FAILED
                break
            # A handler that dropped the view lets the buffer be reused.
            frame = None
            if response is None:
                self.answered_in_c += 1
                continue
            cls = type(response)
            if self.closed or (cls is not list and cls is not self._timed_type):
                self.left = response
                status = _LEFT
                break
            try:
                self._stage(response)
            except (TypeError, ValueError, BufferError, OSError) as exc:
                self.left = exc
                status = _INVALID
                break
            self.answered_in_c += 1
            if cls is self._timed_type:
                # Its last byte is out once the sent count reaches what has
                # been sent plus what is now queued (as Connection._queue).
                timed.append((self.sendfile_bytes + self.copied_bytes + self.unsent_bytes,
                              _perf_counter(), response.timing))
        if status != _SENT or self.closed:
            return status
        try:
            done = self._flush_queue()
        except Exception as exc:
            self.left = exc
            return _SEND_FAILED
        if not done:
            return _UNSENT
        if timed:
            now = _perf_counter()
            while timed:
                entry = timed.popleft()
                entry[2].sent(entry[1], now)
        return _SENT

    # ------------------------------------------------------------------ closing

    def close(self):
        """Drop everything queued (releasing buffers and file regions) and the
        receive buffer. Idempotent. Frames already handed out stay valid."""
        cdef SendPart part
        if self.closed:
            return
        self.closed = True
        # The connection holds this transport: break the cycle.
        self._handler = self._connection = self._timed_type = self._timed = self.left = None
        for i in range(self.head, len(self.parts)):
            part = <SendPart>self.parts[i]
            part.release()
        self.parts = []
        self.head = 0
        self.unsent_bytes = 0
        _retire(self.chunk)
        self.chunk = None
        self.start = self.end = 0

    @property
    def is_closed(self):
        return self.closed

    def fileno(self):
        return self.fd
