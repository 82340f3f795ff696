"""ListConfigResources (API key 74).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    resource_types  []int8  1+
"""

RESPONSE = """
    throttle_time_ms  int32             0+
    error_code        int16             0+
    config_resources  []ConfigResource  0+
      resource_name   string            0+
      resource_type   int8              1+  default=16 ignorable
"""
