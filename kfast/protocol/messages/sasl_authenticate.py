"""SaslAuthenticate (API key 36).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    auth_bytes  bytes  0+
"""

RESPONSE = """
    error_code           int16   0+
    error_message        string  0+  nullable=0+
    auth_bytes           bytes   0+
    session_lifetime_ms  int64   1+  default=0 ignorable
"""
