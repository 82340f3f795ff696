"""DeleteGroups (API key 42).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    groups_names  []string  0+
"""

RESPONSE = """
    throttle_time_ms  int32                   0+
    results           []DeletableGroupResult  0+
      group_id        string                  0+
      error_code      int16                   0+
"""
