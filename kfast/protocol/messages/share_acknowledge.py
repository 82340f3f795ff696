"""ShareAcknowledge (API key 79).

Version 0 was the early-access version of KIP-932 (Kafka 4.0), removed in 4.1;
version 1 is the first stable one; version 2 adds Renew acknowledgements
(KIP-1222).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id                       string                       1+    nullable=1+ default=null
    member_id                      string                       1+    nullable=1+
    share_session_epoch            int32                        1+
    is_renew_ack                   bool                         2+    default=false
    topics                         []AcknowledgeTopic           1+
      topic_id                     uuid                         1+
      partitions                   []AcknowledgePartition       1+
        partition_index            int32                        1+
        acknowledgement_batches    []AcknowledgementBatch       1+
          first_offset             int64                        1+
          last_offset              int64                        1+
          acknowledge_types        []int8                       1+
"""

RESPONSE = """
    throttle_time_ms               int32                        1+
    error_code                     int16                        1+
    error_message                  string                       1+    nullable=1+ default=null
    acquisition_lock_timeout_ms    int32                        2+    ignorable
    responses                      []ShareAcknowledgeTopicResponse 1+
      topic_id                     uuid                         1+
      partitions                   []PartitionData              1+
        partition_index            int32                        1+
        error_code                 int16                        1+
        error_message              string                       1+    nullable=1+ default=null
        current_leader             LeaderIdAndEpoch             1+
          leader_id                int32                        1+
          leader_epoch             int32                        1+
    node_endpoints                 []NodeEndpoint               1+
      node_id                      int32                        1+
      host                         string                       1+
      port                         int32                        1+
      rack                         string                       1+    nullable=1+ default=null
"""
