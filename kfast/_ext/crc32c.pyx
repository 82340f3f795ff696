"""CRC-32C (Castagnoli), the checksum of record batch v2 and producer snapshots.

The C implementation (hardware crc32 instructions with three interleaved
streams, or slicing-by-8 tables) lives in crc32c_impl.h; this module builds
its tables at import, picks the fastest path the CPU supports, and exposes

    crc32c(data, crc=0) -> int       # finalised CRC; chainable like zlib.crc32

to Python and ``crc32c_update`` (see crc32c.pxd) to other kernels.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport uint32_t

cdef extern from "crc32c_impl.h" nogil:
    int KFAST_CRC32C_SOFTWARE
    int KFAST_CRC32C_HARDWARE
    int kfast_crc32c_hardware_available
    int kfast_crc32c_use_hardware
    void kfast_crc32c_init()
    int kfast_crc32c_select(int which)
    uint32_t kfast_crc32c(uint32_t crc, const unsigned char* p, size_t n)

kfast_crc32c_init()


cdef uint32_t crc32c_update(uint32_t crc, const unsigned char* data,
                            size_t length) noexcept nogil:
    return kfast_crc32c(crc, data, length)


def crc32c(data, unsigned int crc=0):
    """CRC-32C of ``data`` (any contiguous buffer), continuing ``crc``.

    ``crc32c(b, crc32c(a)) == crc32c(a + b)``; equals the ``crc32c`` package.
    Large buffers are checksummed with the GIL released.
    """
    cdef Py_buffer view
    cdef uint32_t result
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if view.len >= 65536:
            with nogil:
                result = kfast_crc32c(crc, <const unsigned char*>view.buf, <size_t>view.len)
        else:
            result = kfast_crc32c(crc, <const unsigned char*>view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return result


def implementation():
    """'hardware' or 'software': the path crc32c() currently uses."""
    return "hardware" if kfast_crc32c_use_hardware else "software"


def hardware_available():
    """True if this CPU has CRC-32C instructions kfast can use."""
    return bool(kfast_crc32c_hardware_available)


def _force_implementation(str which):
    """Test hook: 'software', 'hardware' or 'auto' (the default choice).

    Process-wide; tests restore 'auto' afterwards.
    """
    if which == "auto":
        which = "hardware" if kfast_crc32c_hardware_available else "software"
    if which == "software":
        kfast_crc32c_select(KFAST_CRC32C_SOFTWARE)
    elif which == "hardware":
        if kfast_crc32c_select(KFAST_CRC32C_HARDWARE) != 0:
            raise RuntimeError("this CPU has no CRC-32C instructions")
    else:
        raise ValueError(f"unknown CRC-32C implementation {which!r}")
