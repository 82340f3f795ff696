"""ElectLeaders (API key 43).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    election_type     int8               1+
    topic_partitions  []TopicPartitions  0+  nullable=0+
      topic           string             0+
      partitions      []int32            0+
    timeout_ms        int32              0+  default=60000
"""

RESPONSE = """
    throttle_time_ms          int32                    0+
    error_code                int16                    1+
    replica_election_results  []ReplicaElectionResult  0+
      topic                   string                   0+
      partition_result        []PartitionResult        0+
        partition_id          int32                    0+
        error_code            int16                    0+
        error_message         string                   0+  nullable=0+
"""
