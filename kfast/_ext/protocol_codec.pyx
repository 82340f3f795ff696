# Schema-driven codec for Kafka request and response bodies.
#
# Why an interpreter and not generated Cython per API: Kafka 4.2 defines ~85
# APIs with ~600 versioned messages; generated code for all of them would be
# tens of thousands of lines to compile and to import. Instead
# kfast.protocol.schema compiles one (API, version, direction) at first use
# into a tree of StructProgram/FieldOp objects (typed C fields, the field's
# interned dict key, its sub-program), and the loops below walk that tree in
# C. Per field the cost is one switch on a C int plus the work the value needs
# (a dict store, an int or str object); there is no Python-level dispatch.
#
# Wire grammar (Kafka "protocol primitives"):
#   int8/16/32/64, uint16/32, float64 : fixed width, big-endian
#   bool        : int8, 0 = false, anything else = true
#   uuid        : 16 bytes, most significant half first
#   string      : int16 length (-1 = null) + UTF-8       [non-flexible]
#                 (invalid UTF-8 decodes with U+FFFD, as Java's String does)
#                 uvarint (length + 1, 0 = null) + UTF-8  [flexible, "compact"]
#   bytes,
#   records     : int32 length (-1 = null) + bytes       [non-flexible]
#                 uvarint (length + 1, 0 = null) + bytes  [flexible]
#   array       : int32 count (-1 = null) + elements     [non-flexible]
#                 uvarint (count + 1, 0 = null) + elements [flexible]
#   struct      : its fields in order; a nullable struct field is preceded by
#                 int8 -1 (null) or 1 (present)
#   tagged fields (end of every struct in a flexible version):
#                 uvarint count, then per field: uvarint tag, uvarint size,
#                 `size` bytes holding the value; tags ascending.
#
# Decoding checks every read against the end of the buffer and every length
# or count against the bytes that remain before it allocates anything; any
# violation raises the configured malformed-input exception (kfast.protocol
# installs MalformedRequestException, Kafka's INVALID_REQUEST).
#
# Decoded structs are instances of the message classes kfast.protocol.schema
# builds; their attributes live in the instance __dict__, which the decoder
# fills in C and installs in one step. Encoding reads the same __dict__.
#
# Record bytes never get copied on the way in: a `records` field decodes to
# a memoryview slice of the input buffer. On the way out a `records` value
# may be bytes-like, a FileRegion-like object (anything that is not a buffer
# but has .length and .read()), or a list of those; in "parts" mode regions and
# large buffers are emitted as separate parts so the network layer can
# sendfile/writev them.

from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyObject_CheckBuffer
from cpython.dict cimport PyDict_SetItem
from cpython.list cimport PyList_New, PyList_SET_ITEM, PyList_GET_SIZE, PyList_GET_ITEM
from cpython.tuple cimport PyTuple_GET_SIZE, PyTuple_GET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8, PyUnicode_Check
from cpython.long cimport PyLong_FromLong, PyLong_FromLongLong, PyLong_AsLongLong, PyLong_FromUnsignedLong
from cpython.float cimport PyFloat_FromDouble, PyFloat_AsDouble
from cpython.ref cimport Py_INCREF
from cpython.object cimport PyObject, PyTypeObject
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy
from libc.stdlib cimport malloc, realloc, free

from kfast._ext.varint cimport read_uvarint32, write_uvarint32, VARINT_OK
from kfast._ext.views cimport view_slice
from kfast._ext.wire cimport grow_buffer

cdef extern from "Python.h":
    int PyObject_GenericSetDict(object o, object d, void* ctx) except -1
    dict PyObject_GenericGetDict(object o, void* ctx)
    object PyType_GenericAlloc(PyTypeObject* t, Py_ssize_t n)
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
    PyObject* PyDict_GetItemWithError(object d, object key) except? NULL
    object PyMemoryView_FromObject(object o)
    Py_buffer* PyMemoryView_GET_BUFFER(object mv)

import uuid as _uuid_module

# Field kinds (FieldOp.kind, FieldOp.elem_kind).
cpdef enum:
    KIND_INT8 = 1
    KIND_INT16 = 2
    KIND_INT32 = 3
    KIND_INT64 = 4
    KIND_UINT16 = 5
    KIND_UINT32 = 6
    KIND_FLOAT64 = 7
    KIND_BOOL = 8
    KIND_STRING = 9
    KIND_BYTES = 10
    KIND_RECORDS = 11
    KIND_UUID = 12
    KIND_ARRAY = 13
    KIND_STRUCT = 14

# How a default is materialised (FieldOp.default_kind): shared immutable
# value, a fresh empty list, or a fresh default-constructed struct.
cpdef enum:
    DEFAULT_VALUE = 0
    DEFAULT_LIST = 1
    DEFAULT_STRUCT = 2

# Records or bytes values at least this long are sent as their own part in
# parts mode instead of being copied into the header chunk.
cdef enum:
    SEPARATE_PART_MIN = 32768

cdef object _Malformed = ValueError       # replaced by configure()
cdef object _Unsupported = ValueError     # replaced by configure()
cdef object _UUID = _uuid_module.UUID
cdef object _ZERO_UUID = _uuid_module.UUID(int=0)
cdef object _MISSING = object()


def configure(malformed, unsupported):
    """Install the exception classes raised for malformed input and for a
    non-default value in a field the target version lacks (kfast.protocol
    passes MalformedRequestException and UnsupportedVersionException)."""
    global _Malformed, _Unsupported
    _Malformed = malformed
    _Unsupported = unsupported


cdef class FieldOp:
    """One field of a struct as one version encodes it."""
    cdef readonly object key            # interned attribute name
    cdef readonly int kind
    cdef readonly int elem_kind         # for KIND_ARRAY: element kind
    cdef readonly bint nullable
    cdef readonly bint compact          # flexible encoding of lengths
    cdef readonly StructProgram struct  # KIND_STRUCT, or array of structs
    cdef readonly int tag               # tagged fields only, else -1
    cdef readonly object default
    cdef readonly int default_kind
    cdef readonly bint ignorable
    cdef readonly object default_factory  # struct class for DEFAULT_STRUCT

    def __init__(self, key, int kind, int elem_kind, bint nullable, bint compact,
                 StructProgram struct, int tag, default, int default_kind,
                 bint ignorable, default_factory):
        self.key = key
        self.kind = kind
        self.elem_kind = elem_kind
        self.nullable = nullable
        self.compact = compact
        self.struct = struct
        self.tag = tag
        self.default = default
        self.default_kind = default_kind
        self.ignorable = ignorable
        self.default_factory = default_factory


cdef class StructProgram:
    """A struct as one version encodes it: fields in wire order, tagged
    fields by tag, and the fields this version lacks (filled with defaults
    on decode, checked on encode)."""
    cdef readonly object cls
    cdef readonly tuple ops
    cdef readonly tuple tagged_ops      # ascending tag
    cdef readonly dict tagged_by_tag
    cdef readonly tuple absent
    cdef readonly bint flexible
    cdef readonly Py_ssize_t min_size   # fewest bytes an instance occupies

    def __init__(self, cls, bint flexible):
        self.cls = cls
        self.flexible = flexible
        self.ops = ()
        self.tagged_ops = ()
        self.tagged_by_tag = {}
        self.absent = ()
        self.min_size = 0

    def set_fields(self, tuple ops, tuple tagged_ops, tuple absent):
        """Second phase of construction, so recursive structures can refer to
        a program before its fields are compiled."""
        self.ops = ops
        self.tagged_ops = tagged_ops
        self.tagged_by_tag = {op.tag: op for op in tagged_ops}
        self.absent = absent
        cdef Py_ssize_t n = 1 if self.flexible else 0
        for op in ops:
            n += _min_size(op)
        self.min_size = n


cdef Py_ssize_t _fixed_size(int kind):
    if kind == KIND_INT8 or kind == KIND_BOOL:
        return 1
    if kind == KIND_INT16 or kind == KIND_UINT16:
        return 2
    if kind == KIND_INT32 or kind == KIND_UINT32:
        return 4
    if kind == KIND_INT64 or kind == KIND_FLOAT64:
        return 8
    if kind == KIND_UUID:
        return 16
    return 0


cdef Py_ssize_t _min_size(FieldOp op):
    cdef Py_ssize_t n = _fixed_size(op.kind)
    if n:
        return n
    if op.kind == KIND_STRING:
        return 1 if op.compact else 2
    if op.kind == KIND_BYTES or op.kind == KIND_RECORDS or op.kind == KIND_ARRAY:
        return 1 if op.compact else 4
    if op.kind == KIND_STRUCT:
        return 1 if op.nullable else op.struct.min_size
    return 0


cdef inline object _make_default(FieldOp op):
    if op.default_kind == DEFAULT_LIST:
        return []
    if op.default_kind == DEFAULT_STRUCT:
        return op.default_factory()
    return op.default


cdef inline object _new_message(object cls, dict d):
    o = PyType_GenericAlloc(<PyTypeObject*>cls, 0)
    PyObject_GenericSetDict(o, d, NULL)
    return o


# ---------------------------------------------------------------- decoding


cdef class _Reader:
    cdef const uint8_t* start
    cdef const uint8_t* p
    cdef const uint8_t* end
    cdef object view            # memoryview of the whole input, for records

    cdef inline int need(self, Py_ssize_t n) except -1:
        if n < 0 or self.end - self.p < n:
            raise _Malformed(f"truncated at byte {self.p - self.start}: need {n} more, "
                             f"{self.end - self.p} remain")
        return 0

    cdef inline uint32_t uvarint(self) except? 0xFFFFFFFF:
        cdef uint32_t v
        cdef int rc = read_uvarint32(&self.p, self.end, &v)
        if rc != VARINT_OK:
            raise _Malformed(f"bad unsigned varint at byte {self.p - self.start}")
        return v

    cdef inline int8_t i8(self) except? -128:
        self.need(1)
        cdef int8_t v = <int8_t>self.p[0]
        self.p += 1
        return v

    cdef inline int16_t i16(self) except? -32768:
        self.need(2)
        cdef int16_t v = <int16_t>((<uint16_t>self.p[0] << 8) | self.p[1])
        self.p += 2
        return v

    cdef inline uint32_t u32(self) except? 0xFFFFFFFF:
        self.need(4)
        cdef uint32_t v = ((<uint32_t>self.p[0] << 24) | (<uint32_t>self.p[1] << 16)
                           | (<uint32_t>self.p[2] << 8) | self.p[3])
        self.p += 4
        return v

    cdef inline uint64_t u64(self) except? 0xFFFFFFFFFFFFFFFF:
        self.need(8)
        cdef uint64_t v = 0
        cdef int i
        for i in range(8):
            v = (v << 8) | self.p[i]
        self.p += 8
        return v

    # Length of a string/bytes/array: -1 for null, else a length already
    # checked against the remaining bytes (times `unit`, the fewest bytes one
    # element can take).
    cdef inline Py_ssize_t length(self, bint compact, bint wide, Py_ssize_t unit) except -2:
        cdef Py_ssize_t n
        if compact:
            n = <Py_ssize_t>self.uvarint() - 1
        elif wide:
            n = <int32_t>self.u32()
        else:
            n = self.i16()
        if n < -1:
            raise _Malformed(f"negative length {n} at byte {self.p - self.start}")
        if n > 0 and n > (self.end - self.p) // unit:
            raise _Malformed(f"length {n} exceeds the {self.end - self.p} remaining bytes "
                             f"at byte {self.p - self.start}")
        return n


cdef object _decode_value(int kind, FieldOp op, _Reader r):
    cdef Py_ssize_t n, i
    cdef uint64_t hi, lo
    cdef const char* s
    cdef int8_t marker
    cdef uint64_t bits
    cdef double dbl
    if kind == KIND_INT32:
        return PyLong_FromLong(<int32_t>r.u32())
    if kind == KIND_INT16:
        return PyLong_FromLong(r.i16())
    if kind == KIND_INT64:
        return PyLong_FromLongLong(<int64_t>r.u64())
    if kind == KIND_INT8:
        return PyLong_FromLong(r.i8())
    if kind == KIND_BOOL:
        return r.i8() != 0
    if kind == KIND_STRING:
        n = r.length(op.compact, False, 1)
        if n == -1:
            if not op.nullable:
                raise _Malformed(f"null for non-nullable string {op.key}")
            return None
        s = <const char*>r.p
        r.p += n
        return PyUnicode_DecodeUTF8(s, n, "replace")
    if kind == KIND_UUID:
        hi = r.u64()
        lo = r.u64()
        if hi == 0 and lo == 0:
            return _ZERO_UUID
        return _UUID(int=(PyLong_FromUnsignedLongLong(hi) << 64) | PyLong_FromUnsignedLongLong(lo))
    if kind == KIND_RECORDS or kind == KIND_BYTES:
        n = r.length(op.compact, True, 1)
        if n == -1:
            if not op.nullable:
                raise _Malformed(f"null for non-nullable bytes {op.key}")
            return None
        i = r.p - r.start
        r.p += n
        if kind == KIND_RECORDS:
            return view_slice(r.view, i, n)
        return PyBytes_FromStringAndSize(<const char*>(r.start + i), n)
    if kind == KIND_UINT16:
        return PyLong_FromLong(<uint16_t>r.i16())
    if kind == KIND_UINT32:
        return PyLong_FromUnsignedLong(r.u32())
    if kind == KIND_FLOAT64:
        bits = r.u64()
        memcpy(&dbl, &bits, 8)
        return PyFloat_FromDouble(dbl)
    if kind == KIND_STRUCT:
        if op.nullable:
            marker = r.i8()
            if marker < 0:
                return None
        return _decode_struct(op.struct, r)
    if kind == KIND_ARRAY:
        return _decode_array(op, r)
    raise AssertionError(f"unknown field kind {kind}")


cdef object _decode_array(FieldOp op, _Reader r):
    cdef Py_ssize_t unit, n, i
    cdef int ek = op.elem_kind
    if ek == KIND_STRUCT:
        unit = op.struct.min_size
    else:
        unit = _fixed_size(ek)
        if unit == 0:
            unit = 1 if op.compact else (2 if ek == KIND_STRING else 4)
    if unit < 1:
        unit = 1
    n = r.length(op.compact, True, unit)
    if n == -1:
        if not op.nullable:
            raise _Malformed(f"null for non-nullable array {op.key}")
        return None
    cdef list out = PyList_New(n)
    cdef object item
    if ek == KIND_STRUCT:
        for i in range(n):
            item = _decode_struct(op.struct, r)
            Py_INCREF(item)
            PyList_SET_ITEM(out, i, item)
    elif ek == KIND_INT32:
        for i in range(n):
            item = PyLong_FromLong(<int32_t>r.u32())
            Py_INCREF(item)
            PyList_SET_ITEM(out, i, item)
    else:
        for i in range(n):
            # Array elements are never null (Kafka has no nullable elements).
            item = _decode_element(ek, op, r)
            Py_INCREF(item)
            PyList_SET_ITEM(out, i, item)
    return out


cdef object _decode_element(int kind, FieldOp op, _Reader r):
    cdef Py_ssize_t n
    cdef const char* s
    if kind == KIND_STRING:
        n = r.length(op.compact, False, 1)
        if n == -1:
            raise _Malformed(f"null element in string array {op.key}")
        s = <const char*>r.p
        r.p += n
        return PyUnicode_DecodeUTF8(s, n, "replace")
    return _decode_value(kind, op, r)


cdef object _decode_struct(StructProgram prog, _Reader r):
    cdef dict d = {}
    cdef FieldOp op
    cdef tuple ops = prog.ops
    cdef Py_ssize_t i, count
    cdef uint32_t tag, size
    cdef const uint8_t* field_end
    cdef const uint8_t* saved_end
    for i in range(PyTuple_GET_SIZE(ops)):
        op = <FieldOp>PyTuple_GET_ITEM(ops, i)
        PyDict_SetItem(d, op.key, _decode_value(op.kind, op, r))
    # Fields this version lacks, and tagged fields not sent, stay out of the
    # dict: the message class supplies their defaults on access.
    if prog.flexible:
        count = r.uvarint()
        if count > r.end - r.p:
            raise _Malformed(f"{count} tagged fields but only {r.end - r.p} bytes remain")
        for i in range(count):
            tag = r.uvarint()
            size = r.uvarint()
            r.need(size)
            field_end = r.p + size
            found = prog.tagged_by_tag.get(tag)
            if found is None:
                # Unknown tags are skipped: a newer peer may send fields this
                # schema does not know, which is the point of tagged fields.
                r.p = field_end
                continue
            op = <FieldOp>found
            saved_end = r.end
            r.end = field_end
            try:
                PyDict_SetItem(d, op.key, _decode_value(op.kind, op, r))
            finally:
                r.end = saved_end
            if r.p != field_end:
                raise _Malformed(f"tagged field {tag} ({op.key}) declares {size} bytes "
                                 f"but its value takes {size - (field_end - r.p)}")
    return _new_message(prog.cls, d)


def decode(StructProgram prog, buf, Py_ssize_t offset=0):
    """Decode one struct from ``buf[offset:]``; returns (message, end offset).

    ``buf`` is any object supporting the buffer protocol; `records` fields in
    the result are memoryview slices of it (zero-copy).
    """
    cdef Py_buffer pb
    cdef _Reader r = _Reader.__new__(_Reader)
    PyObject_GetBuffer(buf, &pb, PyBUF_SIMPLE)
    try:
        if offset < 0 or offset > pb.len:
            raise _Malformed(f"offset {offset} outside a buffer of {pb.len} bytes")
        r.start = <const uint8_t*>pb.buf
        r.p = r.start + offset
        r.end = r.start + pb.len
        r.view = PyMemoryView_FromObject(buf)
        if r.view.ndim != 1 or r.view.itemsize != 1:
            r.view = r.view.cast("B")
        msg = _decode_struct(prog, r)
        return msg, r.p - r.start
    finally:
        PyBuffer_Release(&pb)


cdef extern from "Python.h":
    object PyLong_FromUnsignedLongLong(unsigned long long v)


def decode_request_header(buf, list flexible_from):
    """Request header v1/v2 (v0 is only ControlledShutdown v0, not served):

        api_key int16, api_version int16, correlation_id int32,
        client_id nullable string (always int16 length, even in v2),
        [v2] tagged fields

    ``flexible_from[api_key]`` is the first flexible version of that API
    (header v2 from there on), -1 if it is never flexible, None if unknown.
    Returns (api_key, api_version, correlation_id, client_id, header_length).
    """
    cdef Py_buffer pb
    cdef _Reader r = _Reader.__new__(_Reader)
    cdef int16_t api_key, api_version
    cdef int32_t correlation_id
    cdef Py_ssize_t n, i, count
    cdef uint32_t size
    PyObject_GetBuffer(buf, &pb, PyBUF_SIMPLE)
    try:
        r.start = <const uint8_t*>pb.buf
        r.p = r.start
        r.end = r.start + pb.len
        api_key = r.i16()
        api_version = r.i16()
        correlation_id = <int32_t>r.u32()
        n = r.length(False, False, 1)
        if n == -1:
            client_id = None
        else:
            client_id = PyUnicode_DecodeUTF8(<const char*>r.p, n, "replace")
            r.p += n
        flex = None
        if 0 <= api_key < len(flexible_from):
            flex = flexible_from[api_key]
        if flex is None:
            raise _Malformed(f"unknown API key {api_key}")
        if flex >= 0 and api_version >= flex:
            count = r.uvarint()
            for i in range(count):
                r.uvarint()
                size = r.uvarint()
                r.need(size)
                r.p += size
        return api_key, api_version, correlation_id, client_id, r.p - r.start
    finally:
        PyBuffer_Release(&pb)


def decode_response_header(buf, bint flexible):
    """Response header v0 (correlation_id int32) or v1 (v0 + tagged fields).
    Returns (correlation_id, header_length)."""
    cdef Py_buffer pb
    cdef _Reader r = _Reader.__new__(_Reader)
    cdef Py_ssize_t i, count
    cdef uint32_t size
    PyObject_GetBuffer(buf, &pb, PyBUF_SIMPLE)
    try:
        r.start = <const uint8_t*>pb.buf
        r.p = r.start
        r.end = r.start + pb.len
        correlation_id = <int32_t>r.u32()
        if flexible:
            count = r.uvarint()
            for i in range(count):
                r.uvarint()
                size = r.uvarint()
                r.need(size)
                r.p += size
        return correlation_id, r.p - r.start
    finally:
        PyBuffer_Release(&pb)


# ---------------------------------------------------------------- encoding

cdef class _Writer:
    cdef uint8_t* buf
    cdef Py_ssize_t length
    cdef Py_ssize_t capacity
    cdef list parts             # None unless parts mode
    cdef Py_ssize_t parts_size  # bytes already moved into parts

    def __cinit__(self):
        self.capacity = 256
        self.buf = <uint8_t*>malloc(self.capacity)
        if self.buf == NULL:
            raise MemoryError()
        self.length = 0
        self.parts = None
        self.parts_size = 0

    def __dealloc__(self):
        free(self.buf)

    cdef inline int reserve(self, Py_ssize_t n) except -1:
        cdef Py_ssize_t want = self.length + n
        if want <= self.capacity:
            return 0
        return grow_buffer(&self.buf, &self.capacity, want)

    cdef inline int u8(self, uint8_t v) except -1:
        self.reserve(1)
        self.buf[self.length] = v
        self.length += 1
        return 0

    cdef inline int u16(self, uint16_t v) except -1:
        self.reserve(2)
        self.buf[self.length] = <uint8_t>(v >> 8)
        self.buf[self.length + 1] = <uint8_t>v
        self.length += 2
        return 0

    cdef inline int u32(self, uint32_t v) except -1:
        self.reserve(4)
        cdef uint8_t* p = self.buf + self.length
        p[0] = <uint8_t>(v >> 24)
        p[1] = <uint8_t>(v >> 16)
        p[2] = <uint8_t>(v >> 8)
        p[3] = <uint8_t>v
        self.length += 4
        return 0

    cdef inline int u64(self, uint64_t v) except -1:
        self.reserve(8)
        cdef uint8_t* p = self.buf + self.length
        cdef int i
        for i in range(8):
            p[i] = <uint8_t>(v >> (56 - 8 * i))
        self.length += 8
        return 0

    cdef inline int uvarint(self, uint32_t v) except -1:
        self.reserve(5)
        cdef uint8_t* e = write_uvarint32(self.buf + self.length, v)
        self.length = e - self.buf
        return 0

    cdef inline int raw(self, const void* data, Py_ssize_t n) except -1:
        self.reserve(n)
        memcpy(self.buf + self.length, data, n)
        self.length += n
        return 0

    # Length prefix of strings (wide=False), bytes and arrays (wide=True);
    # -1 = null.
    cdef inline int length_prefix(self, Py_ssize_t n, bint compact, bint wide) except -1:
        if compact:
            return self.uvarint(<uint32_t>(n + 1))
        if wide:
            return self.u32(<uint32_t><int32_t>n)
        if n > 32767:
            raise ValueError(f"string of {n} bytes exceeds the int16 length of this version")
        return self.u16(<uint16_t><int16_t>n)

    cdef int flush_part(self) except -1:
        if self.length:
            self.parts.append(PyBytes_FromStringAndSize(<const char*>self.buf, self.length))
            self.parts_size += self.length
            self.length = 0
        return 0

    cdef int append_part(self, object part, Py_ssize_t n) except -1:
        self.flush_part()
        self.parts.append(part)
        self.parts_size += n
        return 0


cdef inline int64_t _as_int(object v, int64_t lo, int64_t hi, FieldOp op) except? -1:
    cdef int64_t x = PyLong_AsLongLong(v)
    if x < lo or x > hi:
        raise OverflowError(f"{op.key}={x} out of range [{lo}, {hi}]")
    return x


cdef int _encode_value(int kind, FieldOp op, object v, _Writer w) except -1:
    cdef Py_ssize_t n
    cdef const char* s
    cdef double dbl
    cdef uint64_t bits
    if kind == KIND_INT32:
        return w.u32(<uint32_t><int32_t>_as_int(v, -2147483648, 2147483647, op))
    if kind == KIND_INT16:
        return w.u16(<uint16_t><int16_t>_as_int(v, -32768, 32767, op))
    if kind == KIND_INT64:
        return w.u64(<uint64_t>PyLong_AsLongLong(v))
    if kind == KIND_INT8:
        return w.u8(<uint8_t><int8_t>_as_int(v, -128, 127, op))
    if kind == KIND_BOOL:
        return w.u8(1 if v else 0)
    if kind == KIND_STRING:
        if v is None:
            if not op.nullable:
                raise ValueError(f"{op.key} is not nullable in this version")
            return w.length_prefix(-1, op.compact, False)
        if PyUnicode_Check(v):
            s = PyUnicode_AsUTF8AndSize(v, &n)
            w.length_prefix(n, op.compact, False)
            return w.raw(s, n)
        return _encode_buffer(op, v, w, False)
    if kind == KIND_UUID:
        if v is None:
            v = _ZERO_UUID
        if isinstance(v, _UUID):
            v = v.bytes
        if len(v) != 16:
            raise ValueError(f"{op.key} must be a UUID or 16 bytes")
        return _encode_raw_buffer(v, w)
    if kind == KIND_RECORDS:
        return _encode_records(op, v, w)
    if kind == KIND_BYTES:
        if v is None:
            if not op.nullable:
                raise ValueError(f"{op.key} is not nullable in this version")
            return w.length_prefix(-1, op.compact, True)
        return _encode_buffer(op, v, w, True)
    if kind == KIND_UINT16:
        return w.u16(<uint16_t>_as_int(v, 0, 65535, op))
    if kind == KIND_UINT32:
        return w.u32(<uint32_t>_as_int(v, 0, 4294967295, op))
    if kind == KIND_FLOAT64:
        dbl = PyFloat_AsDouble(v)
        memcpy(&bits, &dbl, 8)
        return w.u64(bits)
    if kind == KIND_STRUCT:
        if op.nullable:
            if v is None:
                return w.u8(0xFF)
            w.u8(1)
        elif v is None:
            raise ValueError(f"{op.key} is not nullable in this version")
        return _encode_struct(op.struct, v, w)
    if kind == KIND_ARRAY:
        return _encode_array(op, v, w)
    raise AssertionError(f"unknown field kind {kind}")


cdef int _encode_raw_buffer(object v, _Writer w) except -1:
    cdef Py_buffer pb
    PyObject_GetBuffer(v, &pb, PyBUF_SIMPLE)
    try:
        w.raw(pb.buf, pb.len)
    finally:
        PyBuffer_Release(&pb)
    return 0


cdef int _encode_buffer(FieldOp op, object v, _Writer w, bint wide) except -1:
    cdef Py_buffer pb
    PyObject_GetBuffer(v, &pb, PyBUF_SIMPLE)
    try:
        w.length_prefix(pb.len, op.compact, wide)
        if w.parts is not None and pb.len >= SEPARATE_PART_MIN:
            w.append_part(v, pb.len)
        else:
            w.raw(pb.buf, pb.len)
    finally:
        PyBuffer_Release(&pb)
    return 0


cdef Py_ssize_t _piece_length(object piece) except -1:
    # Bytes of one records piece: a buffer's byte length, or a region's
    # declared `length` (read as an attribute: FileRegion's __len__ would
    # cost a Python frame per partition).
    cdef Py_buffer pb
    cdef Py_ssize_t n
    if PyObject_CheckBuffer(piece):
        PyObject_GetBuffer(piece, &pb, PyBUF_SIMPLE)
        n = pb.len
        PyBuffer_Release(&pb)
        return n
    return piece.length


cdef int _encode_record_piece(object piece, _Writer w) except -1:
    cdef Py_buffer pb
    if PyObject_CheckBuffer(piece):
        PyObject_GetBuffer(piece, &pb, PyBUF_SIMPLE)
        try:
            if w.parts is not None and pb.len >= SEPARATE_PART_MIN:
                w.append_part(piece, pb.len)
            else:
                w.raw(pb.buf, pb.len)
        finally:
            PyBuffer_Release(&pb)
    elif w.parts is not None:
        w.append_part(piece, piece.length)
    else:
        data = piece.read()
        if len(data) != piece.length:
            raise ValueError(f"{piece!r} yielded {len(data)} bytes")
        _encode_raw_buffer(data, w)
    return 0


cdef int _encode_records(FieldOp op, object v, _Writer w) except -1:
    # records := length prefix + the concatenation of the pieces; a region
    # (FileRegion) counts its declared length, which the sender honours.
    cdef Py_ssize_t total = 0
    if v is None:
        if not op.nullable:
            raise ValueError(f"{op.key} is not nullable in this version")
        return w.length_prefix(-1, op.compact, True)
    if isinstance(v, list):
        for piece in <list>v:
            total += _piece_length(piece)
        w.length_prefix(total, op.compact, True)
        for piece in <list>v:
            _encode_record_piece(piece, w)
        return 0
    w.length_prefix(_piece_length(v), op.compact, True)
    return _encode_record_piece(v, w)


cdef int _encode_array(FieldOp op, object v, _Writer w) except -1:
    cdef Py_ssize_t n, i
    cdef int ek = op.elem_kind
    cdef object item
    if v is None:
        if not op.nullable:
            raise ValueError(f"{op.key} is not nullable in this version")
        return w.length_prefix(-1, op.compact, True)
    if not isinstance(v, list):
        v = list(v)
    n = PyList_GET_SIZE(v)
    w.length_prefix(n, op.compact, True)
    if ek == KIND_STRUCT:
        for i in range(n):
            _encode_struct(op.struct, <object>PyList_GET_ITEM(v, i), w)
    elif ek == KIND_INT32:
        w.reserve(4 * n)
        for i in range(n):
            w.u32(<uint32_t><int32_t>_as_int(<object>PyList_GET_ITEM(v, i),
                                             -2147483648, 2147483647, op))
    else:
        for i in range(n):
            item = <object>PyList_GET_ITEM(v, i)
            if item is None:
                raise ValueError(f"null element in array {op.key}")
            _encode_value(ek, op, item, w)
    return 0


cdef inline dict _fields_of(StructProgram prog, object obj):
    # A body is a message instance (its attribute dict) or a plain dict.
    if isinstance(obj, dict):
        return <dict>obj
    if obj is None:
        raise ValueError(f"null {prog.cls.__name__} where the schema has no null")
    return PyObject_GenericGetDict(obj, NULL)


cdef bint _is_default(FieldOp op, object v) except -1:
    if op.default_kind == DEFAULT_LIST:
        return v is not None and len(v) == 0
    if op.default_kind == DEFAULT_STRUCT:
        return v is not None and v._is_default()
    if v is op.default:
        return True
    if op.kind == KIND_RECORDS:
        return v is None
    return v == op.default


cdef int _encode_struct(StructProgram prog, object obj, _Writer w) except -1:
    cdef dict d = _fields_of(prog, obj)
    cdef tuple ops = prog.ops
    cdef FieldOp op
    cdef PyObject* found
    cdef Py_ssize_t i, ntagged
    cdef object v
    cdef _Writer tw
    for i in range(PyTuple_GET_SIZE(ops)):
        op = <FieldOp>PyTuple_GET_ITEM(ops, i)
        found = PyDict_GetItemWithError(d, op.key)
        if found != NULL:
            _encode_value(op.kind, op, <object>found, w)
        elif op.default_kind == DEFAULT_LIST:
            w.length_prefix(0, op.compact, True)
        else:
            _encode_value(op.kind, op, _make_default(op), w)
    ops = prog.absent
    for i in range(PyTuple_GET_SIZE(ops)):
        op = <FieldOp>PyTuple_GET_ITEM(ops, i)
        if op.ignorable:
            continue
        found = PyDict_GetItemWithError(d, op.key)
        if found != NULL and not _is_default(op, <object>found):
            raise _Unsupported(f"{prog.cls.__name__}.{op.key}={<object>found!r} "
                               f"cannot be written in this version")
    if not prog.flexible:
        return 0
    # Tagged fields holding their default are not written (Kafka's rule), so
    # count first; most structs write a single 0.
    ops = prog.tagged_ops
    ntagged = 0
    for i in range(PyTuple_GET_SIZE(ops)):
        op = <FieldOp>PyTuple_GET_ITEM(ops, i)
        found = PyDict_GetItemWithError(d, op.key)
        if found != NULL and not _is_default(op, <object>found):
            ntagged += 1
    w.uvarint(<uint32_t>ntagged)
    if ntagged == 0:
        return 0
    for i in range(PyTuple_GET_SIZE(ops)):
        op = <FieldOp>PyTuple_GET_ITEM(ops, i)
        found = PyDict_GetItemWithError(d, op.key)
        if found == NULL or _is_default(op, <object>found):
            continue
        # The size precedes the value, so the value is encoded aside first.
        tw = _Writer.__new__(_Writer)
        _encode_value(op.kind, op, <object>found, tw)
        w.uvarint(<uint32_t>op.tag)
        w.uvarint(<uint32_t>tw.length)
        w.raw(tw.buf, tw.length)
    return 0


def encode_frame(bytes header, StructProgram prog, body, bint parts=False):
    """A size-prefixed frame: int32 size, ``header`` (already encoded), body.

    Returns bytes; with ``parts`` a list whose first item is the 4-byte size,
    then bytes chunks, buffers of at least 32 KiB and record regions exactly
    as they go on the wire (their lengths sum to 4 + size).
    """
    cdef _Writer w = _Writer.__new__(_Writer)
    cdef Py_ssize_t size
    cdef uint8_t* p
    if parts:
        w.parts = []
    else:
        w.u32(0)                # patched below
    w.raw(PyBytes_AS_STRING(header), len(header))
    _encode_struct(prog, body, w)
    if not parts:
        size = w.length - 4
        p = w.buf
        p[0] = <uint8_t>(size >> 24)
        p[1] = <uint8_t>(size >> 16)
        p[2] = <uint8_t>(size >> 8)
        p[3] = <uint8_t>size
        return PyBytes_FromStringAndSize(<const char*>w.buf, w.length)
    w.flush_part()
    size = w.parts_size
    w.u32(<uint32_t>size)
    w.parts.insert(0, PyBytes_FromStringAndSize(<const char*>w.buf, 4))
    return w.parts


def encode(StructProgram prog, body):
    """The body alone (no frame, no header) as bytes."""
    cdef _Writer w = _Writer.__new__(_Writer)
    _encode_struct(prog, body, w)
    return PyBytes_FromStringAndSize(<const char*>w.buf, w.length)


def init_message(self, dict fields):
    """Message.__init__: adopt the keyword dict as the instance's attribute
    dict after checking every name is a field (TypeError otherwise). Fields
    not given are not stored: the class supplies their defaults."""
    cdef frozenset names = type(self)._field_set
    for key in fields:
        if key not in names:
            raise TypeError(f"{type(self).__name__} has no field {key!r}")
    PyObject_GenericSetDict(self, fields, NULL)
