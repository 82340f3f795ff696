"""SaslHandshake (API key 17).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    mechanism  string  0+
"""

RESPONSE = """
    error_code  int16     0+
    mechanisms  []string  0+
"""
