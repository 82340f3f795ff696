"""Envelope (API key 58).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    request_data         bytes  0+
    request_principal    bytes  0+  nullable=0+
    client_host_address  bytes  0+
"""

RESPONSE = """
    response_data  bytes  0+  nullable=0+ default=null
    error_code     int16  0+
"""
