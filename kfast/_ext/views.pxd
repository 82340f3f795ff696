# Narrowed memoryviews for the decoders (protocol_codec.pyx, produce_codec.pyx).
# A declaration-only module: the inline function compiles into each kernel
# that cimports it.

from cpython.buffer cimport Py_buffer

cdef extern from "Python.h":
    object PyMemoryView_FromObject(object o)
    Py_buffer* PyMemoryView_GET_BUFFER(object mv)


cdef inline object view_slice(object view, Py_ssize_t offset, Py_ssize_t n):
    # view[offset:offset + n] without building a slice object: a new view
    # registered on the same managed buffer (so it keeps the exporter alive
    # exactly as a slice would), then narrowed. `view` must be a 1-D,
    # unsigned-byte, C-contiguous memoryview (what the decoders make of
    # their input), for which buf/len/shape[0] are the whole description of
    # the window.
    out = PyMemoryView_FromObject(view)
    cdef Py_buffer* b = PyMemoryView_GET_BUFFER(out)
    b.buf = <char*>b.buf + offset
    b.len = n
    b.shape[0] = n
    return out
