"""DescribeQuorum (API key 55).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    topics               []TopicData      0+
      topic_name         string           0+
      partitions         []PartitionData  0+
        partition_index  int32            0+
"""

RESPONSE = """
    error_code                      int16            0+
    error_message                   string           2+  nullable=2+ ignorable
    topics                          []TopicData      0+
      topic_name                    string           0+
      partitions                    []PartitionData  0+
        partition_index             int32            0+
        error_code                  int16            0+
        error_message               string           2+  nullable=2+ ignorable
        leader_id                   int32            0+
        leader_epoch                int32            0+
        high_watermark              int64            0+
        current_voters              []ReplicaState   0+
          replica_id                int32            0+
          replica_directory_id      uuid             2+
          log_end_offset            int64            0+
          last_fetch_timestamp      int64            1+  default=-1 ignorable
          last_caught_up_timestamp  int64            1+  default=-1 ignorable
        observers                   []ReplicaState   0+
          replica_id                int32            0+
          replica_directory_id      uuid             2+
          log_end_offset            int64            0+
          last_fetch_timestamp      int64            1+  default=-1 ignorable
          last_caught_up_timestamp  int64            1+  default=-1 ignorable
    nodes                           []Node           2+
      node_id                       int32            2+
      listeners                     []Listener       2+
        name                        string           2+
        host                        string           2+
        port                        uint16           2+
"""
