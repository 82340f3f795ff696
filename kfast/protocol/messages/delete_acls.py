"""DeleteAcls (API key 31).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    filters                 []DeleteAclsFilter  0+
      resource_type_filter  int8                0+
      resource_name_filter  string              0+  nullable=0+
      pattern_type_filter   int8                1+  default=3
      principal_filter      string              0+  nullable=0+
      host_filter           string              0+  nullable=0+
      operation             int8                0+
      permission_type       int8                0+
"""

RESPONSE = """
    throttle_time_ms     int32                     0+
    filter_results       []DeleteAclsFilterResult  0+
      error_code         int16                     0+
      error_message      string                    0+  nullable=0+
      matching_acls      []DeleteAclsMatchingAcl   0+
        error_code       int16                     0+
        error_message    string                    0+  nullable=0+
        resource_type    int8                      0+
        resource_name    string                    0+
        pattern_type     int8                      1+  default=3
        principal        string                    0+
        host             string                    0+
        operation        int8                      0+
        permission_type  int8                      0+
"""
