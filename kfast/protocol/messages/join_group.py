"""JoinGroup (API key 11).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id              string                      0+
    session_timeout_ms    int32                       0+
    rebalance_timeout_ms  int32                       1+  default=-1 ignorable
    member_id             string                      0+
    group_instance_id     string                      5+  nullable=5+ default=null
    protocol_type         string                      0+
    protocols             []JoinGroupRequestProtocol  0+
      name                string                      0+
      metadata            bytes                       0+
    reason                string                      8+  nullable=8+ default=null ignorable
"""

RESPONSE = """
    throttle_time_ms     int32                      2+  ignorable
    error_code           int16                      0+
    generation_id        int32                      0+  default=-1
    protocol_type        string                     7+  nullable=7+ default=null ignorable
    protocol_name        string                     0+  nullable=7+
    leader               string                     0+
    skip_assignment      bool                       9+  default=false
    member_id            string                     0+
    members              []JoinGroupResponseMember  0+
      member_id          string                     0+
      group_instance_id  string                     5+  nullable=5+ default=null ignorable
      metadata           bytes                      0+
"""
