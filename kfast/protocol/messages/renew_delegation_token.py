"""RenewDelegationToken (API key 39).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    hmac             bytes  0+
    renew_period_ms  int64  0+
"""

RESPONSE = """
    error_code           int16  0+
    expiry_timestamp_ms  int64  0+
    throttle_time_ms     int32  0+
"""
