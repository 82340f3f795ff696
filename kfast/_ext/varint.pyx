# cython: freethreading_compatible = True
"""Python access to the varint kernel (varint.pxd holds the grammar).

Cython kernels cimport the inline readers/writers from ``varint.pxd``; these
wrappers exist for Python callers (tests, tools) and raise
``CorruptRecordException`` on truncated or overlong input, which is what a
record decoder reports for a bad varint.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from cpython.buffer cimport PyBUF_SIMPLE, PyObject_GetBuffer, PyBuffer_Release
from cpython.bytes cimport PyBytes_FromStringAndSize

from kfast.protocol.errors import CorruptRecordException


cdef _raise_status(int rc):
    if rc == VARINT_TRUNCATED:
        raise CorruptRecordException("truncated varint")
    raise CorruptRecordException("varint is longer than its type allows")


# Which reader _decode runs.
cdef enum Width:
    ZIGZAG_INT32
    ZIGZAG_INT64
    UNSIGNED_64


cdef tuple _decode(buf, Py_ssize_t offset, Width width):
    cdef Py_buffer view
    cdef int32_t value32 = 0
    cdef int64_t value64 = 0
    cdef uint64_t uvalue = 0
    cdef object value
    cdef int rc
    cdef const uint8_t* start
    cdef const uint8_t* p
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        if offset < 0 or offset > view.len:
            raise ValueError("offset outside the buffer")
        start = <const uint8_t*>view.buf
        p = start + offset
        if width == ZIGZAG_INT32:
            rc = read_varint(&p, start + view.len, &value32)
            value = value32
        elif width == ZIGZAG_INT64:
            rc = read_varlong(&p, start + view.len, &value64)
            value = value64
        else:
            rc = read_uvarint64(&p, start + view.len, &uvalue)
            value = uvalue
        if rc != VARINT_OK:
            _raise_status(rc)
        return value, p - start
    finally:
        PyBuffer_Release(&view)


def decode_varint(buf, Py_ssize_t offset=0):
    """Decode a zigzag varint (int32) at ``offset``; return (value, next_offset)."""
    return _decode(buf, offset, ZIGZAG_INT32)


def decode_varlong(buf, Py_ssize_t offset=0):
    """Decode a zigzag varlong (int64) at ``offset``; return (value, next_offset)."""
    return _decode(buf, offset, ZIGZAG_INT64)


def decode_uvarint(buf, Py_ssize_t offset=0):
    """Decode an unsigned varint (up to 64 bits); return (value, next_offset)."""
    return _decode(buf, offset, UNSIGNED_64)


def encode_varint(int32_t value):
    cdef uint8_t out[5]
    cdef uint8_t* end = write_varint(out, value)
    return PyBytes_FromStringAndSize(<char*>out, end - out)


def encode_varlong(int64_t value):
    cdef uint8_t out[10]
    cdef uint8_t* end = write_varlong(out, value)
    return PyBytes_FromStringAndSize(<char*>out, end - out)


def encode_uvarint(uint64_t value):
    cdef uint8_t out[10]
    cdef uint8_t* end = write_uvarint64(out, value)
    return PyBytes_FromStringAndSize(<char*>out, end - out)


def size_of_varint(int32_t value):
    return varint_size(value)


def size_of_varlong(int64_t value):
    return varlong_size(value)
