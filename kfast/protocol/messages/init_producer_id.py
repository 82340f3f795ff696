"""InitProducerId (API key 22).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    transactional_id        string  0+  nullable=0+
    transaction_timeout_ms  int32   0+
    producer_id             int64   3+  default=-1
    producer_epoch          int16   3+  default=-1
    enable2_pc              bool    6+  default=false
    keep_prepared_txn       bool    6+  default=false
"""

RESPONSE = """
    throttle_time_ms            int32  0+  ignorable
    error_code                  int16  0+
    producer_id                 int64  0+  default=-1
    producer_epoch              int16  0+
    ongoing_txn_producer_id     int64  6+  default=-1
    ongoing_txn_producer_epoch  int16  6+  default=-1
"""
