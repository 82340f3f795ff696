"""DescribeTopicPartitions (API key 75).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    topics                    []TopicRequest  0+
      name                    string          0+
    response_partition_limit  int32           0+  default=2000
    cursor                    Cursor          0+  nullable=0+ default=null
      topic_name              string          0+
      partition_index         int32           0+
"""

RESPONSE = """
    throttle_time_ms               int32                                       0+  ignorable
    topics                         []DescribeTopicPartitionsResponseTopic      0+
      error_code                   int16                                       0+
      name                         string                                      0+  nullable=0+
      topic_id                     uuid                                        0+  ignorable
      is_internal                  bool                                        0+  default=false ignorable
      partitions                   []DescribeTopicPartitionsResponsePartition  0+
        error_code                 int16                                       0+
        partition_index            int32                                       0+
        leader_id                  int32                                       0+
        leader_epoch               int32                                       0+  default=-1 ignorable
        replica_nodes              []int32                                     0+
        isr_nodes                  []int32                                     0+
        eligible_leader_replicas   []int32                                     0+  nullable=0+ default=null
        last_known_elr             []int32                                     0+  nullable=0+ default=null
        offline_replicas           []int32                                     0+  ignorable
      topic_authorized_operations  int32                                       0+  default=-2147483648
    next_cursor                    Cursor                                      0+  nullable=0+ default=null
      topic_name                   string                                      0+
      partition_index              int32                                       0+
"""
