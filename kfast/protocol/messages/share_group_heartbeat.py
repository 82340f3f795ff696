"""ShareGroupHeartbeat (API key 76).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id                string    0+
    member_id               string    0+
    member_epoch            int32     0+
    rack_id                 string    0+  nullable=0+ default=null
    subscribed_topic_names  []string  0+  nullable=0+ default=null
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
