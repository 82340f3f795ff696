"""AlterClientQuotas (API key 49).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    entries          []EntryData   0+
      entity         []EntityData  0+
        entity_type  string        0+
        entity_name  string        0+  nullable=0+
      ops            []OpData      0+
        key          string        0+
        value        float64       0+
        remove       bool          0+
    validate_only    bool          0+
"""

RESPONSE = """
    throttle_time_ms  int32         0+
    entries           []EntryData   0+
      error_code      int16         0+
      error_message   string        0+  nullable=0+
      entity          []EntityData  0+
        entity_type   string        0+
        entity_name   string        0+  nullable=0+
"""
