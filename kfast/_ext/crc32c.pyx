"""CRC-32C (Castagnoli), the checksum of record batch v2 and producer snapshots.

The C implementations (carry-less-multiply folding with VPCLMULQDQ or
PCLMULQDQ, the crc32 instruction with three interleaved streams, or
slicing-by-8 tables) live in crc32c_impl.h; this module builds their tables
at import, picks the fastest path the CPU supports, and exposes

    crc32c(data, crc=0) -> int       # finalised CRC; chainable like zlib.crc32

to Python and ``crc32c_update`` (see crc32c.pxd) to other kernels.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport uint32_t

cdef extern from "crc32c_impl.h" nogil:
    int KFAST_CRC32C_SOFTWARE
    int KFAST_CRC32C_HARDWARE
    int KFAST_CRC32C_PCLMUL
    int KFAST_CRC32C_VPCLMUL
    int kfast_crc32c_available[]
    int kfast_crc32c_implementation
    void kfast_crc32c_init()
    int kfast_crc32c_best()
    int kfast_crc32c_select(int which)
    uint32_t kfast_crc32c(uint32_t crc, const unsigned char* p, size_t n)

kfast_crc32c_init()

# implementation() names, fastest last, as crc32c_impl.h numbers them.
_NAMES = {
    KFAST_CRC32C_SOFTWARE: "software",      # slicing-by-8 tables
    KFAST_CRC32C_HARDWARE: "hardware",      # crc32 instruction, 3 streams
    KFAST_CRC32C_PCLMUL: "pclmul",          # PCLMULQDQ folding (x86-64)
    KFAST_CRC32C_VPCLMUL: "vpclmul",        # AVX2 VPCLMULQDQ folding (x86-64)
}
_NUMBERS = {name: number for number, name in _NAMES.items()}


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
    """The path crc32c() currently uses: 'vpclmul', 'pclmul', 'hardware' or 'software'."""
    return _NAMES[kfast_crc32c_implementation]


def available_implementations():
    """The implementations this CPU supports, slowest first."""
    return [name for number, name in sorted(_NAMES.items()) if kfast_crc32c_available[number]]


def hardware_available():
    """True if this CPU has CRC-32C instructions kfast can use."""
    return bool(kfast_crc32c_available[KFAST_CRC32C_HARDWARE])


def _force_implementation(str which):
    """Test and benchmark hook: one of available_implementations(), or 'auto'
    (the fastest available, the import-time choice).

    Process-wide; tests restore 'auto' afterwards.
    """
    cdef int number
    if which == "auto":
        number = kfast_crc32c_best()
    elif which in _NUMBERS:
        number = _NUMBERS[which]
    else:
        raise ValueError(f"unknown CRC-32C implementation {which!r}")
    if kfast_crc32c_select(number) != 0:
        raise RuntimeError(f"this CPU cannot run the {which!r} CRC-32C implementation")
