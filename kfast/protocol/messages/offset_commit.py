"""OffsetCommit (API key 8).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id                       string                          0+
    generation_id_or_member_epoch  int32                           1+   default=-1 ignorable
    member_id                      string                          1+   ignorable
    group_instance_id              string                          7+   nullable=7+ default=null
    retention_time_ms              int64                           2-4  default=-1 ignorable
    topics                         []OffsetCommitRequestTopic      0+
      name                         string                          0-9  ignorable
      topic_id                     uuid                            10+  ignorable
      partitions                   []OffsetCommitRequestPartition  0+
        partition_index            int32                           0+
        committed_offset           int64                           0+
        committed_leader_epoch     int32                           6+   default=-1 ignorable
        commit_timestamp           int64                           1    default=-1
        committed_metadata         string                          0+   nullable=0+
"""

RESPONSE = """
    throttle_time_ms     int32                            3+   ignorable
    topics               []OffsetCommitResponseTopic      0+
      name               string                           0-9  ignorable
      topic_id           uuid                             10+  ignorable
      partitions         []OffsetCommitResponsePartition  0+
        partition_index  int32                            0+
        error_code       int16                            0+
"""
