"""PushTelemetry (API key 72).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    client_instance_id  uuid   0+
    subscription_id     int32  0+
    terminating         bool   0+
    compression_type    int8   0+
    metrics             bytes  0+
"""

RESPONSE = """
    throttle_time_ms  int32  0+
    error_code        int16  0+
"""
