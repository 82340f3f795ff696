"""CreateDelegationToken (API key 38).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    owner_principal_type  string               3+  nullable=3+
    owner_principal_name  string               3+  nullable=3+
    renewers              []CreatableRenewers  0+
      principal_type      string               0+
      principal_name      string               0+
    max_lifetime_ms       int64                0+
"""

RESPONSE = """
    error_code                      int16   0+
    principal_type                  string  0+
    principal_name                  string  0+
    token_requester_principal_type  string  3+
    token_requester_principal_name  string  3+
    issue_timestamp_ms              int64   0+
    expiry_timestamp_ms             int64   0+
    max_timestamp_ms                int64   0+
    token_id                        string  0+
    hmac                            bytes   0+
    throttle_time_ms                int32   0+
"""
