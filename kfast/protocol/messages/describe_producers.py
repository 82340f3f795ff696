"""DescribeProducers (API key 61).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    topics               []TopicRequest  0+
      name               string          0+
      partition_indexes  []int32         0+
"""

RESPONSE = """
    throttle_time_ms                int32                0+
    topics                          []TopicResponse      0+
      name                          string               0+
      partitions                    []PartitionResponse  0+
        partition_index             int32                0+
        error_code                  int16                0+
        error_message               string               0+  nullable=0+ default=null
        active_producers            []ProducerState      0+
          producer_id               int64                0+
          producer_epoch            int32                0+
          last_sequence             int32                0+  default=-1
          last_timestamp            int64                0+  default=-1
          coordinator_epoch         int32                0+
          current_txn_start_offset  int64                0+  default=-1
"""
