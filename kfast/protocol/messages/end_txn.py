"""EndTxn (API key 26).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    transactional_id  string  0+
    producer_id       int64   0+
    producer_epoch    int16   0+
    committed         bool    0+
"""

RESPONSE = """
    throttle_time_ms  int32  0+
    error_code        int16  0+
    producer_id       int64  5+  default=-1 ignorable
    producer_epoch    int16  5+  default=-1 ignorable
"""
