"""AlterPartition (API key 56).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    broker_id                  int32            0+
    broker_epoch               int64            0+   default=-1
    topics                     []TopicData      0+
      topic_name               string           0-1  ignorable
      topic_id                 uuid             2+   ignorable
      partitions               []PartitionData  0+
        partition_index        int32            0+
        leader_epoch           int32            0+
        new_isr                []int32          0-2
        new_isr_with_epochs    []BrokerState    3+
          broker_id            int32            3+
          broker_epoch         int64            3+   default=-1
        leader_recovery_state  int8             1+   default=0
        partition_epoch        int32            0+
"""

RESPONSE = """
    throttle_time_ms           int32            0+
    error_code                 int16            0+
    topics                     []TopicData      0+
      topic_name               string           0-1  ignorable
      topic_id                 uuid             2+   ignorable
      partitions               []PartitionData  0+
        partition_index        int32            0+
        error_code             int16            0+
        leader_id              int32            0+
        leader_epoch           int32            0+
        isr                    []int32          0+
        leader_recovery_state  int8             1+   default=0 ignorable
        partition_epoch        int32            0+
"""
