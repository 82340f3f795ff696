"""ControllerRegistration (API key 70).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    controller_id            int32       0+
    incarnation_id           uuid        0+
    zk_migration_ready       bool        0+
    listeners                []Listener  0+
      name                   string      0+
      host                   string      0+
      port                   uint16      0+
      security_protocol      int16       0+
    features                 []Feature   0+
      name                   string      0+
      min_supported_version  int16       0+
      max_supported_version  int16       0+
"""

RESPONSE = """
    throttle_time_ms  int32   0+
    error_code        int16   0+
    error_message     string  0+  nullable=0+
"""
