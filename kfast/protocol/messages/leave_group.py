"""LeaveGroup (API key 13).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id             string            0+
    member_id            string            0-2
    members              []MemberIdentity  3+
      member_id          string            3+
      group_instance_id  string            3+   nullable=3+ default=null
      reason             string            5+   nullable=5+ default=null ignorable
"""

RESPONSE = """
    throttle_time_ms     int32             1+  ignorable
    error_code           int16             0+
    members              []MemberResponse  3+
      member_id          string            3+
      group_instance_id  string            3+  nullable=3+
      error_code         int16             3+
"""
