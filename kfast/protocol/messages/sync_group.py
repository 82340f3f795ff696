"""SyncGroup (API key 14).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id           string                        0+
    generation_id      int32                         0+
    member_id          string                        0+
    group_instance_id  string                        3+  nullable=3+ default=null
    protocol_type      string                        5+  nullable=5+ default=null ignorable
    protocol_name      string                        5+  nullable=5+ default=null ignorable
    assignments        []SyncGroupRequestAssignment  0+
      member_id        string                        0+
      assignment       bytes                         0+
"""

RESPONSE = """
    throttle_time_ms  int32   1+  ignorable
    error_code        int16   0+
    protocol_type     string  5+  nullable=5+ default=null ignorable
    protocol_name     string  5+  nullable=5+ default=null ignorable
    assignment        bytes   0+
"""
