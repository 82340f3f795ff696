"""AlterShareGroupOffsets (API key 91).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id                       string                       0+
    topics                         []AlterShareGroupOffsetsRequestTopic 0+
      topic_name                   string                       0+
      partitions                   []AlterShareGroupOffsetsRequestPartition 0+
        partition_index            int32                        0+
        start_offset               int64                        0+
"""

RESPONSE = """
    throttle_time_ms               int32                        0+
    error_code                     int16                        0+
    error_message                  string                       0+    nullable=0+ default=null
    responses                      []AlterShareGroupOffsetsResponseTopic 0+
      topic_name                   string                       0+
      topic_id                     uuid                         0+
      partitions                   []AlterShareGroupOffsetsResponsePartition 0+
        partition_index            int32                        0+
        error_code                 int16                        0+
        error_message              string                       0+    nullable=0+ default=null
"""
