"""Heartbeat (API key 12).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id           string  0+
    generation_id      int32   0+
    member_id          string  0+
    group_instance_id  string  3+  nullable=3+ default=null
"""

RESPONSE = """
    throttle_time_ms  int32  1+  ignorable
    error_code        int16  0+
"""
