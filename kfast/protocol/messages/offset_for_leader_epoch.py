"""OffsetForLeaderEpoch (API key 23).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    replica_id                int32                       3+  default=-2 ignorable
    topics                    []OffsetForLeaderTopic      0+
      topic                   string                      0+
      partitions              []OffsetForLeaderPartition  0+
        partition             int32                       0+
        current_leader_epoch  int32                       2+  default=-1 ignorable
        leader_epoch          int32                       0+
"""

RESPONSE = """
    throttle_time_ms  int32                         2+  ignorable
    topics            []OffsetForLeaderTopicResult  0+
      topic           string                        0+
      partitions      []EpochEndOffset              0+
        error_code    int16                         0+
        partition     int32                         0+
        leader_epoch  int32                         1+  default=-1 ignorable
        end_offset    int64                         0+  default=-1
"""
