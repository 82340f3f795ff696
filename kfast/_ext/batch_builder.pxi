# Included by batch.pyx: the write side of record batch v2 (layout in batch.pxd).
# Part of the kfast._ext.batch module, sharing its imports and helpers.

@cython.final
cdef class RecordBatchBuilder:
    """Builds one v2 record batch, as Kafka's MemoryRecordsBuilder does.

    ``append`` encodes each record straight into a growing buffer; ``build``
    writes the header (lastOffsetDelta, base/max timestamp, count, CRC),
    compressing the records section with ``compression``. With
    ``max_batch_bytes``, ``append`` returns False instead of adding a record
    that would take the (uncompressed) batch past it; the first record is
    always accepted, like the Java producer's.
    """
    cdef uint8_t* _buf
    cdef Py_ssize_t _len
    cdef Py_ssize_t _cap
    cdef readonly int compression
    cdef readonly int64_t base_offset
    cdef readonly int32_t partition_leader_epoch
    cdef readonly int64_t producer_id
    cdef readonly int16_t producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly bint is_transactional
    cdef readonly bint is_control
    cdef readonly int timestamp_type
    cdef Py_ssize_t _max_batch_bytes
    cdef int64_t _first_timestamp
    cdef int64_t _max_timestamp
    cdef int64_t _last_offset
    cdef int32_t _count

    def __cinit__(self, int compression=0, *, int64_t base_offset=0, int32_t partition_leader_epoch=-1,
                  int64_t producer_id=-1, int16_t producer_epoch=-1, int32_t base_sequence=-1,
                  bint is_transactional=False, bint is_control=False, int timestamp_type=0,
                  max_batch_bytes=None):
        if compression < 0 or compression > MAX_CODEC:
            raise UnsupportedCompressionTypeException(f"Unknown compression type id: {compression}")
        if timestamp_type not in (0, 1):
            raise ValueError(f"timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime), not {timestamp_type}")
        self.compression = compression
        self.base_offset = base_offset
        self.partition_leader_epoch = partition_leader_epoch
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.timestamp_type = timestamp_type
        self._max_batch_bytes = -1 if max_batch_bytes is None else max_batch_bytes
        self._cap = 4096
        self._buf = <uint8_t*>PyMem_Malloc(self._cap)
        if self._buf == NULL:
            raise MemoryError()
        self._len = 0
        self._count = 0
        self._first_timestamp = -1
        self._max_timestamp = -1
        self._last_offset = base_offset - 1

    def __dealloc__(self):
        PyMem_Free(self._buf)

    @property
    def records_count(self):
        return self._count

    @property
    def size_in_bytes(self):
        """Size of the batch so far, uncompressed."""
        return RECORD_BATCH_OVERHEAD + self._len

    @property
    def last_offset(self):
        return self._last_offset

    cdef int _reserve(self, Py_ssize_t extra) except -1:
        cdef Py_ssize_t cap = self._cap
        cdef uint8_t* grown
        if self._len + extra <= cap:
            return 0
        while cap < self._len + extra:
            cap *= 2
        grown = <uint8_t*>PyMem_Realloc(self._buf, cap)
        if grown == NULL:
            raise MemoryError()
        self._buf = grown
        self._cap = cap
        return 0

    def append(self, int64_t timestamp, key, value, headers=None, offset=None):
        """Add a record; returns False (and adds nothing) if the batch is full.

        key, value: bytes-like or None. headers: sequence of (str, bytes-like
        or None). offset: absolute offset, default the previous one + 1;
        must grow.
        """
        cdef Py_buffer kview, vview, hview
        cdef bint has_kview = False, has_vview = False
        cdef const uint8_t* kptr = NULL
        cdef const uint8_t* vptr = NULL
        cdef Py_ssize_t klen = -1, vlen = -1, body, hlen, hsize = 0
        cdef int64_t record_offset, offset_delta, timestamp_delta
        cdef int32_t header_count = 0
        cdef uint8_t* w
        cdef const char* hk
        cdef Py_ssize_t hklen
        if offset is None:
            record_offset = self._last_offset + 1
        else:
            record_offset = offset
            if record_offset <= self._last_offset:
                raise ValueError(f"Illegal offset {record_offset} following previous offset {self._last_offset}")
        offset_delta = record_offset - self.base_offset
        if offset_delta < 0 or offset_delta > INT32_MAX:
            raise ValueError(f"Offset {record_offset} out of range for base offset {self.base_offset}")
        timestamp_delta = timestamp - (timestamp if self._count == 0 else self._first_timestamp)
        try:
            if key is not None:
                if PyBytes_CheckExact(key):
                    kptr = <const uint8_t*>PyBytes_AS_STRING(key)
                    klen = PyBytes_GET_SIZE(key)
                else:
                    PyObject_GetBuffer(key, &kview, PyBUF_SIMPLE)
                    has_kview = True
                    kptr = <const uint8_t*>kview.buf
                    klen = kview.len
            if value is not None:
                if PyBytes_CheckExact(value):
                    vptr = <const uint8_t*>PyBytes_AS_STRING(value)
                    vlen = PyBytes_GET_SIZE(value)
                else:
                    PyObject_GetBuffer(value, &vview, PyBUF_SIMPLE)
                    has_vview = True
                    vptr = <const uint8_t*>vview.buf
                    vlen = vview.len
            if klen > INT32_MAX or vlen > INT32_MAX:
                raise ValueError("key or value larger than 2 GiB")
            if headers:
                headers = [(_header_key(hkey), hvalue) for hkey, hvalue in headers]
                header_count = len(headers)
                for hkey, hvalue in headers:
                    hsize += varint_size(<int32_t>len(<bytes>hkey)) + len(<bytes>hkey)
                    if hvalue is None:
                        hsize += 1
                    else:
                        hlen = len(memoryview(hvalue).cast("B"))
                        hsize += varint_size(<int32_t>hlen) + hlen
            body = (1 + varlong_size(timestamp_delta) + varint_size(<int32_t>offset_delta)
                    + varint_size(<int32_t>klen) + (klen if klen > 0 else 0)
                    + varint_size(<int32_t>vlen) + (vlen if vlen > 0 else 0)
                    + varint_size(header_count) + hsize)
            if body > INT32_MAX - 16:
                raise ValueError("record larger than 2 GiB")
            if (self._max_batch_bytes >= 0 and self._count > 0
                    and RECORD_BATCH_OVERHEAD + self._len + body + 5 > self._max_batch_bytes):
                return False
            self._reserve(body + 5)
            w = self._buf + self._len
            w = write_varint(w, <int32_t>body)
            w[0] = 0
            w += 1
            w = write_varlong(w, timestamp_delta)
            w = write_varint(w, <int32_t>offset_delta)
            w = write_varint(w, <int32_t>klen)
            if klen > 0:
                memcpy(w, kptr, klen)
                w += klen
            w = write_varint(w, <int32_t>vlen)
            if vlen > 0:
                memcpy(w, vptr, vlen)
                w += vlen
            w = write_varint(w, header_count)
            if header_count:
                for hkey, hvalue in headers:
                    hk = PyBytes_AS_STRING(hkey)
                    hklen = PyBytes_GET_SIZE(hkey)
                    w = write_varint(w, <int32_t>hklen)
                    memcpy(w, hk, hklen)
                    w += hklen
                    if hvalue is None:
                        w = write_varint(w, -1)
                    else:
                        PyObject_GetBuffer(hvalue, &hview, PyBUF_SIMPLE)
                        w = write_varint(w, <int32_t>hview.len)
                        memcpy(w, hview.buf, hview.len)
                        w += hview.len
                        PyBuffer_Release(&hview)
            self._len = w - self._buf
        finally:
            if has_kview:
                PyBuffer_Release(&kview)
            if has_vview:
                PyBuffer_Release(&vview)
        if self._count == 0:
            self._first_timestamp = timestamp
            self._max_timestamp = timestamp
        elif timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._last_offset = record_offset
        self._count += 1
        return True

    def build(self):
        """The batch as bytes (the builder may keep appending and build again)."""
        cdef bytes out
        cdef uint8_t* p
        cdef Py_ssize_t payload_len
        cdef const uint8_t* payload_ptr
        cdef int16_t attributes
        if self.compression:
            section = PyMemoryView_FromMemory(<char*>self._buf, self._len, 0x100)   # PyBUF_READ
            payload = _compression.compress(self.compression, section)
            payload_ptr = <const uint8_t*>PyBytes_AS_STRING(payload)
            payload_len = PyBytes_GET_SIZE(payload)
        else:
            payload_ptr = self._buf
            payload_len = self._len
        if payload_len > INT32_MAX - MIN_BATCH_LENGTH:
            raise ValueError("record batch larger than 2 GiB")
        out = PyBytes_FromStringAndSize(NULL, RECORD_BATCH_OVERHEAD + payload_len)
        p = <uint8_t*>PyBytes_AS_STRING(out)
        attributes = <int16_t>(self.compression | (TIMESTAMP_TYPE_MASK if self.timestamp_type else 0)
                               | (TRANSACTIONAL_FLAG_MASK if self.is_transactional else 0)
                               | (CONTROL_FLAG_MASK if self.is_control else 0))
        store_be64(p + BASE_OFFSET_OFFSET, <uint64_t>self.base_offset)
        store_be32(p + LENGTH_OFFSET, <uint32_t>(RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + payload_len))
        store_be32(p + PARTITION_LEADER_EPOCH_OFFSET, <uint32_t>self.partition_leader_epoch)
        p[MAGIC_OFFSET] = CURRENT_MAGIC
        store_be16(p + ATTRIBUTES_OFFSET, <uint16_t>attributes)
        store_be32(p + LAST_OFFSET_DELTA_OFFSET,
                   <uint32_t>(self._last_offset - self.base_offset if self._count else 0))
        store_be64(p + BASE_TIMESTAMP_OFFSET, <uint64_t>self._first_timestamp)
        store_be64(p + MAX_TIMESTAMP_OFFSET, <uint64_t>self._max_timestamp)
        store_be64(p + PRODUCER_ID_OFFSET, <uint64_t>self.producer_id)
        store_be16(p + PRODUCER_EPOCH_OFFSET, <uint16_t>self.producer_epoch)
        store_be32(p + BASE_SEQUENCE_OFFSET, <uint32_t>self.base_sequence)
        store_be32(p + RECORDS_COUNT_OFFSET, <uint32_t>self._count)
        memcpy(p + RECORDS_OFFSET, payload_ptr, payload_len)
        store_be32(p + CRC_OFFSET, _compute_crc(p, RECORD_BATCH_OVERHEAD + payload_len))
        return out


cdef bytes _header_key(key):
    if isinstance(key, str):
        return (<str>key).encode("utf-8")
    if isinstance(key, bytes):
        return key
    if key is None:
        raise ValueError("record header keys cannot be null")
    return bytes(key)


def build_control_batch(int control_type, int64_t producer_id, int16_t producer_epoch,
                        int32_t coordinator_epoch, int64_t timestamp, int64_t base_offset=0,
                        int32_t partition_leader_epoch=-1):
    """A transaction marker batch (EndTransactionMarker): one control record.

    control_type 0 ABORT, 1 COMMIT. Key: int16 version 0, int16 type.
    Value: int16 version 0, int32 coordinatorEpoch. Uncompressed,
    transactional + control, baseSequence -1.
    """
    cdef uint8_t key[CONTROL_KEY_SIZE]
    cdef uint8_t value[END_TXN_MARKER_SIZE]
    if control_type not in (CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT):
        raise ValueError(f"control_type must be 0 (ABORT) or 1 (COMMIT), not {control_type}")
    store_be16(key + CONTROL_KEY_VERSION_AT, 0)
    store_be16(key + CONTROL_KEY_TYPE_AT, <uint16_t>control_type)
    store_be16(value + END_TXN_MARKER_VERSION_AT, 0)
    store_be32(value + END_TXN_MARKER_COORDINATOR_EPOCH_AT, <uint32_t>coordinator_epoch)
    builder = RecordBatchBuilder(
        COMPRESSION_NONE, base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE,
        is_transactional=True, is_control=True)
    builder.append(timestamp, PyBytes_FromStringAndSize(<char*>key, CONTROL_KEY_SIZE),
                   PyBytes_FromStringAndSize(<char*>value, END_TXN_MARKER_SIZE))
    return builder.build()

