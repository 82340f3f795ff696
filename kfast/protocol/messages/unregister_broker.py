"""UnregisterBroker (API key 64).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    broker_id  int32  0+
"""

RESPONSE = """
    throttle_time_ms  int32   0+
    error_code        int16   0+
    error_message     string  0+  nullable=0+
"""
