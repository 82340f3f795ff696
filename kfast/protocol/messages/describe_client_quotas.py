"""DescribeClientQuotas (API key 48).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    components     []ComponentData  0+
      entity_type  string           0+
      match_type   int8             0+
      match        string           0+  nullable=0+
    strict         bool             0+
"""

RESPONSE = """
    throttle_time_ms  int32         0+
    error_code        int16         0+
    error_message     string        0+  nullable=0+
    entries           []EntryData   0+  nullable=0+
      entity          []EntityData  0+
        entity_type   string        0+
        entity_name   string        0+  nullable=0+
      values          []ValueData   0+
        key           string        0+
        value         float64       0+
"""
