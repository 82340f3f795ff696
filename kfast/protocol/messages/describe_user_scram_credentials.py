"""DescribeUserScramCredentials (API key 50).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    users   []UserName  0+  nullable=0+
      name  string      0+
"""

RESPONSE = """
    throttle_time_ms    int32                                 0+
    error_code          int16                                 0+
    error_message       string                                0+  nullable=0+
    results             []DescribeUserScramCredentialsResult  0+
      user              string                                0+
      error_code        int16                                 0+
      error_message     string                                0+  nullable=0+
      credential_infos  []CredentialInfo                      0+
        mechanism       int8                                  0+
        iterations      int32                                 0+
"""
