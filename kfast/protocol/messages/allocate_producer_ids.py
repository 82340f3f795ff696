"""AllocateProducerIds (API key 67).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    broker_id     int32  0+
    broker_epoch  int64  0+  default=-1
"""

RESPONSE = """
    throttle_time_ms   int32  0+
    error_code         int16  0+
    producer_id_start  int64  0+
    producer_id_len    int32  0+
"""
