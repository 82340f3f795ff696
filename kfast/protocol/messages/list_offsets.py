"""ListOffsets (API key 2).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    replica_id                int32                   0+
    isolation_level           int8                    2+
    topics                    []ListOffsetsTopic      0+
      name                    string                  0+
      partitions              []ListOffsetsPartition  0+
        partition_index       int32                   0+
        current_leader_epoch  int32                   4+   default=-1 ignorable
        timestamp             int64                   0+
        max_num_offsets       int32                   0    default=1
    timeout_ms                int32                   10+  ignorable
"""

RESPONSE = """
    throttle_time_ms       int32                           2+  ignorable
    topics                 []ListOffsetsTopicResponse      0+
      name                 string                          0+
      partitions           []ListOffsetsPartitionResponse  0+
        partition_index    int32                           0+
        error_code         int16                           0+
        old_style_offsets  []int64                         0
        timestamp          int64                           1+  default=-1
        offset             int64                           1+  default=-1
        leader_epoch       int32                           4+  default=-1
"""
