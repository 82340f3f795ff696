"""CreateTopics (API key 19).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    topics                []CreatableTopic              0+
      name                string                        0+
      num_partitions      int32                         0+
      replication_factor  int16                         0+
      assignments         []CreatableReplicaAssignment  0+
        partition_index   int32                         0+
        broker_ids        []int32                       0+
      configs             []CreatableTopicConfig        0+
        name              string                        0+
        value             string                        0+  nullable=0+
    timeout_ms            int32                         0+  default=60000
    validate_only         bool                          1+  default=false
"""

RESPONSE = """
    throttle_time_ms           int32                    2+  ignorable
    topics                     []CreatableTopicResult   0+
      name                     string                   0+
      topic_id                 uuid                     7+  ignorable
      error_code               int16                    0+
      error_message            string                   1+  nullable=0+ ignorable
      topic_config_error_code  int16                    5+  tag=0 tagged=5+ ignorable
      num_partitions           int32                    5+  default=-1 ignorable
      replication_factor       int16                    5+  default=-1 ignorable
      configs                  []CreatableTopicConfigs  5+  nullable=5+ ignorable
        name                   string                   5+
        value                  string                   5+  nullable=5+
        read_only              bool                     5+
        config_source          int8                     5+  default=-1 ignorable
        is_sensitive           bool                     5+
"""
