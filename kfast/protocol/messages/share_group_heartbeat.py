"""ShareGroupHeartbeat (API key 76).

Version 0 was the early-access version of KIP-932 (Kafka 4.0), removed in 4.1;
version 1 is the first stable one.

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id                       string                       1+
    member_id                      string                       1+
    member_epoch                   int32                        1+
    rack_id                        string                       1+    nullable=1+ default=null
    subscribed_topic_names         []string                     1+    nullable=1+ default=null
"""

RESPONSE = """
    throttle_time_ms               int32                        1+
    error_code                     int16                        1+
    error_message                  string                       1+    nullable=1+ default=null
    member_id                      string                       1+    nullable=1+ default=null
    member_epoch                   int32                        1+
    heartbeat_interval_ms          int32                        1+
    assignment                     Assignment                   1+    nullable=1+ default=null
      topic_partitions             []TopicPartitions            1+
        topic_id                   uuid                         1+
        partitions                 []int32                      1+
"""
