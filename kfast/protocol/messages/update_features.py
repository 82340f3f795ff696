"""UpdateFeatures (API key 57).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    timeout_ms           int32               0+  default=60000
    feature_updates      []FeatureUpdateKey  0+
      feature            string              0+
      max_version_level  int16               0+
      allow_downgrade    bool                0
      upgrade_type       int8                1+  default=1
    validate_only        bool                1+  default=false
"""

RESPONSE = """
    throttle_time_ms  int32                     0+
    error_code        int16                     0+
    error_message     string                    0+   nullable=0+
    results           []UpdatableFeatureResult  0-1  ignorable
      feature         string                    0+
      error_code      int16                     0+
      error_message   string                    0+   nullable=0+
"""
