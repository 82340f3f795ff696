"""ShareFetch (API key 78).

Version 0 was the early-access version of KIP-932 (Kafka 4.0), removed in 4.1;
version 1 is the first stable one; version 2 adds share_acquire_mode and
Renew acknowledgements (KIP-1206, KIP-1222).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id                       string                       1+    nullable=1+ default=null
    member_id                      string                       1+    nullable=1+
    share_session_epoch            int32                        1+
    max_wait_ms                    int32                        1+
    min_bytes                      int32                        1+
    max_bytes                      int32                        1+    default=2147483647
    max_records                    int32                        1+
    batch_size                     int32                        1+
    share_acquire_mode             int8                         2+    default=0
    is_renew_ack                   bool                         2+    default=false
    topics                         []FetchTopic                 1+
      topic_id                     uuid                         1+
      partitions                   []FetchPartition             1+
        partition_index            int32                        1+
        acknowledgement_batches    []AcknowledgementBatch       1+
          first_offset             int64                        1+
          last_offset              int64                        1+
          acknowledge_types        []int8                       1+
    forgotten_topics_data          []ForgottenTopic             1+
      topic_id                     uuid                         1+
      partitions                   []int32                      1+
"""

RESPONSE = """
    throttle_time_ms               int32                        1+
    error_code                     int16                        1+
    error_message                  string                       1+    nullable=1+ default=null
    acquisition_lock_timeout_ms    int32                        1+
    responses                      []ShareFetchableTopicResponse 1+
      topic_id                     uuid                         1+
      partitions                   []PartitionData              1+
        partition_index            int32                        1+
        error_code                 int16                        1+
        error_message              string                       1+    nullable=1+ default=null
        acknowledge_error_code     int16                        1+
        acknowledge_error_message  string                       1+    nullable=1+ default=null
        current_leader             LeaderIdAndEpoch             1+
          leader_id                int32                        1+
          leader_epoch             int32                        1+
        records                    records                      1+
        acquired_records           []AcquiredRecords            1+
          first_offset             int64                        1+
          last_offset              int64                        1+
          delivery_count           int16                        1+
    node_endpoints                 []NodeEndpoint               1+
      node_id                      int32                        1+
      host                         string                       1+
      port                         int32                        1+
      rack                         string                       1+    nullable=1+ default=null
"""
