"""AlterUserScramCredentials (API key 51).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    deletions          []ScramCredentialDeletion   0+
      name             string                      0+
      mechanism        int8                        0+
    upsertions         []ScramCredentialUpsertion  0+
      name             string                      0+
      mechanism        int8                        0+
      iterations       int32                       0+
      salt             bytes                       0+
      salted_password  bytes                       0+
"""

RESPONSE = """
    throttle_time_ms  int32                              0+
    results           []AlterUserScramCredentialsResult  0+
      user            string                             0+
      error_code      int16                              0+
      error_message   string                             0+  nullable=0+
"""
