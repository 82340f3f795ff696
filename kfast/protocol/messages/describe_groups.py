"""DescribeGroups (API key 15).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    groups                         []string  0+
    include_authorized_operations  bool      3+
"""

RESPONSE = """
    throttle_time_ms         int32                   1+  ignorable
    groups                   []DescribedGroup        0+
      error_code             int16                   0+
      error_message          string                  6+  nullable=6+ default=null
      group_id               string                  0+
      group_state            string                  0+
      protocol_type          string                  0+
      protocol_data          string                  0+
      members                []DescribedGroupMember  0+
        member_id            string                  0+
        group_instance_id    string                  4+  nullable=4+ default=null ignorable
        client_id            string                  0+
        client_host          string                  0+
        member_metadata      bytes                   0+
        member_assignment    bytes                   0+
      authorized_operations  int32                   3+  default=-2147483648
"""
