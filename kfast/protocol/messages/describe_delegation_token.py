"""DescribeDelegationToken (API key 41).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    owners            []DescribeDelegationTokenOwner  0+  nullable=0+
      principal_type  string                          0+
      principal_name  string                          0+
"""

RESPONSE = """
    error_code                        int16                              0+
    tokens                            []DescribedDelegationToken         0+
      principal_type                  string                             0+
      principal_name                  string                             0+
      token_requester_principal_type  string                             3+
      token_requester_principal_name  string                             3+
      issue_timestamp                 int64                              0+
      expiry_timestamp                int64                              0+
      max_timestamp                   int64                              0+
      token_id                        string                             0+
      hmac                            bytes                              0+
      renewers                        []DescribedDelegationTokenRenewer  0+
        principal_type                string                             0+
        principal_name                string                             0+
    throttle_time_ms                  int32                              0+
"""
