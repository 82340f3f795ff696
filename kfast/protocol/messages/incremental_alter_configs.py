"""IncrementalAlterConfigs (API key 44).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    resources             []AlterConfigsResource  0+
      resource_type       int8                    0+
      resource_name       string                  0+
      configs             []AlterableConfig       0+
        name              string                  0+
        config_operation  int8                    0+
        value             string                  0+  nullable=0+
    validate_only         bool                    0+
"""

RESPONSE = """
    throttle_time_ms  int32                           0+
    responses         []AlterConfigsResourceResponse  0+
      error_code      int16                           0+
      error_message   string                          0+  nullable=0+
      resource_type   int8                            0+
      resource_name   string                          0+
"""
