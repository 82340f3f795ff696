"""DescribeShareGroupOffsets (API key 90).

Version 1 adds the partition lag (KIP-1226).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    groups                         []DescribeShareGroupOffsetsRequestGroup 0+
      group_id                     string                       0+
      topics                       []DescribeShareGroupOffsetsRequestTopic 0+    nullable=0+
        topic_name                 string                       0+
        partitions                 []int32                      0+
"""

RESPONSE = """
    throttle_time_ms               int32                        0+
    groups                         []DescribeShareGroupOffsetsResponseGroup 0+
      group_id                     string                       0+
      topics                       []DescribeShareGroupOffsetsResponseTopic 0+
        topic_name                 string                       0+
        topic_id                   uuid                         0+
        partitions                 []DescribeShareGroupOffsetsResponsePartition 0+
          partition_index          int32                        0+
          start_offset             int64                        0+
          leader_epoch             int32                        0+
          lag                      int64                        1+    default=-1 ignorable
          error_code               int16                        0+
          error_message            string                       0+    nullable=0+ default=null
      error_code                   int16                        0+
      error_message                string                       0+    nullable=0+ default=null
"""
