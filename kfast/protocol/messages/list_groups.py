"""ListGroups (API key 16).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    states_filter  []string  4+
    types_filter   []string  5+
"""

RESPONSE = """
    throttle_time_ms  int32          1+  ignorable
    error_code        int16          0+
    groups            []ListedGroup  0+
      group_id        string         0+
      protocol_type   string         0+
      group_state     string         4+  ignorable
      group_type      string         5+  ignorable
"""
