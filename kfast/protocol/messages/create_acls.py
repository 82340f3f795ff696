"""CreateAcls (API key 30).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    creations                []AclCreation  0+
      resource_type          int8           0+
      resource_name          string         0+
      resource_pattern_type  int8           1+  default=3
      principal              string         0+
      host                   string         0+
      operation              int8           0+
      permission_type        int8           0+
"""

RESPONSE = """
    throttle_time_ms  int32                0+
    results           []AclCreationResult  0+
      error_code      int16                0+
      error_message   string               0+  nullable=0+
"""
