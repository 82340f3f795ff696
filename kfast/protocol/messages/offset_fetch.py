"""OffsetFetch (API key 9).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id               string                      0-7
    topics                 []OffsetFetchRequestTopic   0-7  nullable=2-7
      name                 string                      0-7
      partition_indexes    []int32                     0-7
    groups                 []OffsetFetchRequestGroup   8+
      group_id             string                      8+
      member_id            string                      9+   nullable=9+ default=null ignorable
      member_epoch         int32                       9+   default=-1 ignorable
      topics               []OffsetFetchRequestTopics  8+   nullable=8+
        name               string                      8-9  ignorable
        topic_id           uuid                        10+  ignorable
        partition_indexes  []int32                     8+
    require_stable         bool                        7+   default=false
"""

RESPONSE = """
    throttle_time_ms              int32                            3+   ignorable
    topics                        []OffsetFetchResponseTopic       0-7
      name                        string                           0-7
      partitions                  []OffsetFetchResponsePartition   0-7
        partition_index           int32                            0-7
        committed_offset          int64                            0-7
        committed_leader_epoch    int32                            5-7  default=-1 ignorable
        metadata                  string                           0-7  nullable=0-7
        error_code                int16                            0-7
    error_code                    int16                            2-7  default=0 ignorable
    groups                        []OffsetFetchResponseGroup       8+
      group_id                    string                           8+
      topics                      []OffsetFetchResponseTopics      8+
        name                      string                           8-9  ignorable
        topic_id                  uuid                             10+  ignorable
        partitions                []OffsetFetchResponsePartitions  8+
          partition_index         int32                            8+
          committed_offset        int64                            8+
          committed_leader_epoch  int32                            8+   default=-1 ignorable
          metadata                string                           8+   nullable=8+
          error_code              int16                            8+
      error_code                  int16                            8+   default=0
"""
