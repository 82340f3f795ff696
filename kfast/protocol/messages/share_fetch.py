"""ShareFetch (API key 78).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id                     string                  0+  nullable=0+ default=null
    member_id                    string                  0+  nullable=0+
    share_session_epoch          int32                   0+
    max_wait_ms                  int32                   0+
    min_bytes                    int32                   0+
    max_bytes                    int32                   0+  default=0x7fffffff
    topics                       []FetchTopic            0+
      topic_id                   uuid                    0+
      partitions                 []FetchPartition        0+
        partition_index          int32                   0+
        partition_max_bytes      int32                   0+
        acknowledgement_batches  []AcknowledgementBatch  0+
          first_offset           int64                   0+
          last_offset            int64                   0+
          acknowledge_types      []int8                  0+
    forgotten_topics_data        []ForgottenTopic        0+
      topic_id                   uuid                    0+
      partitions                 []int32                 0+
"""

RESPONSE = """
    throttle_time_ms               int32                          0+
    error_code                     int16                          0+
    error_message                  string                         0+  nullable=0+ default=null
    responses                      []ShareFetchableTopicResponse  0+
      topic_id                     uuid                           0+
      partitions                   []PartitionData                0+
        partition_index            int32                          0+
        error_code                 int16                          0+
        error_message              string                         0+  nullable=0+ default=null
        acknowledge_error_code     int16                          0+
        acknowledge_error_message  string                         0+  nullable=0+ default=null
        current_leader             LeaderIdAndEpoch               0+
          leader_id                int32                          0+
          leader_epoch             int32                          0+
        records                    records                        0+  nullable=0+
        acquired_records           []AcquiredRecords              0+
          first_offset             int64                          0+
          last_offset              int64                          0+
          delivery_count           int16                          0+
    node_endpoints                 []NodeEndpoint                 0+
      node_id                      int32                          0+
      host                         string                         0+
      port                         int32                          0+
      rack                         string                         0+  nullable=0+ default=null
"""
