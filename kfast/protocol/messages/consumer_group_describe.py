"""ConsumerGroupDescribe (API key 69).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_ids                      []string  0+
    include_authorized_operations  bool      0+
"""

RESPONSE = """
    throttle_time_ms            int32              0+
    groups                      []DescribedGroup   0+
      error_code                int16              0+
      error_message             string             0+  nullable=0+ default=null
      group_id                  string             0+
      group_state               string             0+
      group_epoch               int32              0+
      assignment_epoch          int32              0+
      assignor_name             string             0+
      members                   []Member           0+
        member_id               string             0+
        instance_id             string             0+  nullable=0+ default=null
        rack_id                 string             0+  nullable=0+ default=null
        member_epoch            int32              0+
        client_id               string             0+
        client_host             string             0+
        subscribed_topic_names  []string           0+
        subscribed_topic_regex  string             0+  nullable=0+ default=null
        assignment              Assignment         0+
          topic_partitions      []TopicPartitions  0+
            topic_id            uuid               0+
            topic_name          string             0+
            partitions          []int32            0+
        target_assignment       Assignment         0+
          topic_partitions      []TopicPartitions  0+
            topic_id            uuid               0+
            topic_name          string             0+
            partitions          []int32            0+
        member_type             int8               1+  default=-1 ignorable
      authorized_operations     int32              0+  default=-2147483648
"""
