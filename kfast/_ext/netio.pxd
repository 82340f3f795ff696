# Plaintext socket I/O for the broker: framed receives and zero-copy sends.
#
# Wire framing (Kafka's, requests and responses alike):
#
#   frame := size:int32 (big-endian, bytes that follow) payload:byte[size]
#
# Receive side: recv(2) into a chunked receive buffer, frames cut in C. A
# frame is handed out as a writable memoryview into the chunk (the broker
# patches produce batches in place). A chunk counts its live buffer exports;
# its bytes are moved or reused only while none is alive, otherwise the
# unread tail moves to a fresh chunk and the old one lives until the last
# view of it is released. So a frame stays valid for as long as anyone holds
# it, and the synchronous common case never copies. Chunks larger than the
# first size are reused through a bounded pool shared by all connections
# (see _make_room): a large frame then lands in memory already faulted in,
# instead of a fresh allocation grown by copying for every request.
#
# Send side: a FIFO of parts (small memory parts coalesced into one owned
# copy, larger ones held by buffer export); runs of in-memory parts go out
# with one sendmsg(2) (a writev with MSG_NOSIGNAL), file regions with
# sendfile(2).
# Partial sends resume where they stopped; EAGAIN returns control to the
# caller, which waits for writability (the kernel knows nothing of the
# event loop).

from cpython.buffer cimport Py_buffer
from libc.stdint cimport int64_t, uint64_t

cdef extern from "netio_sys.h":
    int KFAST_HAVE_SENDFILE
    int KFAST_IOV_MAX
    ssize_t kfast_sendfile(int sock_fd, int file_fd, int64_t offset,
                           size_t count, int* copied) nogil
    int kfast_sendmsg_flags(int more) nogil


cdef enum:
    # First chunk size, and the size chunks shrink back to.
    DEFAULT_RECEIVE_CHUNK = 65536
    # Size of the iovec array of one sendmsg(2) (KFAST_IOV_MAX caps its use).
    IOV_BATCH = 1024
    # sendfile(2) count per call: Linux caps one call at 0x7ffff000 anyway.
    SENDFILE_MAX_CHUNK = 1073741824
    # The int32 size prefix of every frame.
    FRAME_HEADER = 4
    # Memory parts up to this size are copied, with the size prefix and
    # their small neighbours, into one buffer: a byte copy is cheaper than
    # an iovec and a held export per tiny header. Larger parts are held.
    COALESCE_MAX = 512
    # An empty chunk that is still exported keeps being appended to until
    # its free tail is smaller than this; then receives move to a new chunk.
    MIN_TAIL_ROOM = 4096
    # Bytes of large receive chunks kept for reuse, all connections together
    # (the receive pool, netio.pyx).
    RECEIVE_POOL_BYTES = 67108864


cdef class ReceiveChunk:
    cdef char* data
    cdef Py_ssize_t capacity
    cdef Py_ssize_t exports
    # No transport receives into it any more: it goes to the receive pool
    # once its last export is released.
    cdef bint retired
    # Range the next __getbuffer__ exports (set by PlaintextTransport just
    # before it builds a frame's memoryview).
    cdef Py_ssize_t export_offset
    cdef Py_ssize_t export_length


cdef class SendPart:
    cdef Py_buffer view
    cdef bint has_view
    cdef bint is_file
    cdef const char* base
    # Coalesced small parts (and the size prefix) copied into memory this
    # part owns; built by append() while the response is staged.
    cdef char* owned
    cdef Py_ssize_t owned_length
    cdef Py_ssize_t owned_capacity
    cdef object region
    cdef int64_t position
    cdef int64_t remaining
    cdef void release(self)
    cdef int append(self, const char* data, Py_ssize_t length) except -1


cdef class PlaintextTransport:
    cdef int fd
    cdef bint closed
    cdef Py_ssize_t max_receive_size
    # Receive buffer: [start, end) of `chunk` holds received, unconsumed bytes.
    cdef ReceiveChunk chunk
    cdef Py_ssize_t start
    cdef Py_ssize_t end
    # Send queue: parts[head:] are unsent.
    cdef list parts
    cdef Py_ssize_t head
    cdef readonly int64_t unsent_bytes
    # Counters (per connection; the server sums them for its metrics).
    cdef readonly uint64_t bytes_received
    cdef readonly uint64_t frames_received
    cdef readonly uint64_t responses_queued
    cdef readonly uint64_t sendfile_bytes
    cdef readonly uint64_t copied_bytes
    # Frames answer_frames() answered without the caller's general path.
    cdef readonly uint64_t answered_in_c
    # answer_frames(): what attach() gave, and what the last call left to
    # the caller.
    cdef object _handler
    cdef object _connection
    cdef object _timed_type
    cdef object _timed
    cdef int64_t _max_unsent
    cdef readonly object left

    cdef int _check_invariants(self) except -1
    cdef int _make_room(self) except -1
    cdef Py_ssize_t _frame_size(self) except -2
    cdef object _cut_frame(self)
    cdef int _stage(self, object parts) except -1
    cdef bint _flush_queue(self) except -1
    cdef int _send_memory(self) except -2
    cdef int _send_file(self, SendPart part) except -2
    cdef void _pop_part(self)
