"""ListTransactions (API key 66).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    state_filters             []string  0+
    producer_id_filters       []int64   0+
    duration_filter           int64     1+  default=-1
    transactional_id_pattern  string    2+  nullable=2+ default=null
"""

RESPONSE = """
    throttle_time_ms       int32               0+
    error_code             int16               0+
    unknown_state_filters  []string            0+
    transaction_states     []TransactionState  0+
      transactional_id     string              0+
      producer_id          int64               0+
      transaction_state    string              0+
"""
