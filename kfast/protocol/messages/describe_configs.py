"""DescribeConfigs (API key 32).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    resources              []DescribeConfigsResource  0+
      resource_type        int8                       0+
      resource_name        string                     0+
      configuration_keys   []string                   0+  nullable=0+
    include_synonyms       bool                       1+  default=false
    include_documentation  bool                       3+  default=false
"""

RESPONSE = """
    throttle_time_ms   int32                            0+
    results            []DescribeConfigsResult          0+
      error_code       int16                            0+
      error_message    string                           0+  nullable=0+
      resource_type    int8                             0+
      resource_name    string                           0+
      configs          []DescribeConfigsResourceResult  0+
        name           string                           0+
        value          string                           0+  nullable=0+
        read_only      bool                             0+
        config_source  int8                             1+  default=-1 ignorable
        is_default     bool                             0
        is_sensitive   bool                             0+
        synonyms       []DescribeConfigsSynonym         1+  ignorable
          name         string                           1+
          value        string                           1+  nullable=0+
          source       int8                             1+
        config_type    int8                             3+  default=0 ignorable
        documentation  string                           3+  nullable=0+ ignorable
"""
