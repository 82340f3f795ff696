"""AlterPartitionReassignments (API key 45).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    timeout_ms                       int32                    0+  default=60000
    allow_replication_factor_change  bool                     1+  default=true
    topics                           []ReassignableTopic      0+
      name                           string                   0+
      partitions                     []ReassignablePartition  0+
        partition_index              int32                    0+
        replicas                     []int32                  0+  nullable=0+ default=null
"""

RESPONSE = """
    throttle_time_ms                 int32                            0+
    allow_replication_factor_change  bool                             1+  default=true ignorable
    error_code                       int16                            0+
    error_message                    string                           0+  nullable=0+
    responses                        []ReassignableTopicResponse      0+
      name                           string                           0+
      partitions                     []ReassignablePartitionResponse  0+
        partition_index              int32                            0+
        error_code                   int16                            0+
        error_message                string                           0+  nullable=0+
"""
