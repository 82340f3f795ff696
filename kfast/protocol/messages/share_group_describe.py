"""ShareGroupDescribe (API key 77).

Version 0 was the early-access version of KIP-932 (Kafka 4.0), removed in 4.1;
version 1 is the first stable one.

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_ids                      []string                     1+
    include_authorized_operations  bool                         1+
"""

RESPONSE = """
    throttle_time_ms               int32                        1+
    groups                         []DescribedGroup             1+
      error_code                   int16                        1+
      error_message                string                       1+    nullable=1+ default=null
      group_id                     string                       1+
      group_state                  string                       1+
      group_epoch                  int32                        1+
      assignment_epoch             int32                        1+
      assignor_name                string                       1+
      members                      []Member                     1+
        member_id                  string                       1+
        rack_id                    string                       1+    nullable=1+ default=null
        member_epoch               int32                        1+
        client_id                  string                       1+
        client_host                string                       1+
        subscribed_topic_names     []string                     1+
        assignment                 Assignment                   1+
          topic_partitions         []TopicPartitions            1+
            topic_id               uuid                         1+
            topic_name             string                       1+
            partitions             []int32                      1+
      authorized_operations        int32                        1+    default=-2147483648
"""
