"""BrokerHeartbeat (API key 63).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    broker_id                int32   0+
    broker_epoch             int64   0+  default=-1
    current_metadata_offset  int64   0+
    want_fence               bool    0+
    want_shut_down           bool    0+
    offline_log_dirs         []uuid  1+  tag=0 tagged=1+
"""

RESPONSE = """
    throttle_time_ms  int32  0+
    error_code        int16  0+
    is_caught_up      bool   0+  default=false
    is_fenced         bool   0+  default=true
    should_shut_down  bool   0+
"""
