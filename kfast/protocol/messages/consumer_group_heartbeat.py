"""ConsumerGroupHeartbeat (API key 68).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id                string             0+
    member_id               string             0+
    member_epoch            int32              0+
    instance_id             string             0+  nullable=0+ default=null
    rack_id                 string             0+  nullable=0+ default=null
    rebalance_timeout_ms    int32              0+  default=-1
    subscribed_topic_names  []string           0+  nullable=0+ default=null
    subscribed_topic_regex  string             1+  nullable=1+ default=null
    server_assignor         string             0+  nullable=0+ default=null
    topic_partitions        []TopicPartitions  0+  nullable=0+ default=null
      topic_id              uuid               0+
      partitions            []int32            0+
"""

RESPONSE = """
    throttle_time_ms       int32              0+
    error_code             int16              0+
    error_message          string             0+  nullable=0+ default=null
    member_id              string             0+  nullable=0+ default=null
    member_epoch           int32              0+
    heartbeat_interval_ms  int32              0+
    assignment             Assignment         0+  nullable=0+ default=null
      topic_partitions     []TopicPartitions  0+
        topic_id           uuid               0+
        partitions         []int32            0+
"""
