"""ApiVersions (API key 18).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    client_software_name     string  3+  ignorable
    client_software_version  string  3+  ignorable
"""

RESPONSE = """
    error_code                int16                  0+
    api_keys                  []ApiVersion           0+
      api_key                 int16                  0+
      min_version             int16                  0+
      max_version             int16                  0+
    throttle_time_ms          int32                  1+  ignorable
    supported_features        []SupportedFeatureKey  3+  tag=0 tagged=3+ ignorable
      name                    string                 3+
      min_version             int16                  3+
      max_version             int16                  3+
    finalized_features_epoch  int64                  3+  tag=1 tagged=3+ default=-1 ignorable
    finalized_features        []FinalizedFeatureKey  3+  tag=2 tagged=3+ ignorable
      name                    string                 3+
      max_version_level       int16                  3+
      min_version_level       int16                  3+
    zk_migration_ready        bool                   3+  tag=3 tagged=3+ default=false ignorable
"""
