"""GetTelemetrySubscriptions (API key 71).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    client_instance_id  uuid  0+
"""

RESPONSE = """
    throttle_time_ms            int32     0+
    error_code                  int16     0+
    client_instance_id          uuid      0+
    subscription_id             int32     0+
    accepted_compression_types  []int8    0+
    push_interval_ms            int32     0+
    telemetry_max_bytes         int32     0+
    delta_temporality           bool      0+
    requested_metrics           []string  0+
"""
