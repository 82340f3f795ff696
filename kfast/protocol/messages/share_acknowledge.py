"""ShareAcknowledge (API key 79).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id                     string                  0+  nullable=0+ default=null
    member_id                    string                  0+  nullable=0+
    share_session_epoch          int32                   0+
    topics                       []AcknowledgeTopic      0+
      topic_id                   uuid                    0+
      partitions                 []AcknowledgePartition  0+
        partition_index          int32                   0+
        acknowledgement_batches  []AcknowledgementBatch  0+
          first_offset           int64                   0+
          last_offset            int64                   0+
          acknowledge_types      []int8                  0+
"""

RESPONSE = """
    throttle_time_ms     int32                            0+  ignorable
    error_code           int16                            0+  ignorable
    error_message        string                           0+  nullable=0+ default=null
    responses            []ShareAcknowledgeTopicResponse  0+
      topic_id           uuid                             0+  ignorable
      partitions         []PartitionData                  0+
        partition_index  int32                            0+
        error_code       int16                            0+
        error_message    string                           0+  nullable=0+ default=null
        current_leader   LeaderIdAndEpoch                 0+
          leader_id      int32                            0+
          leader_epoch   int32                            0+
    node_endpoints       []NodeEndpoint                   0+
      node_id            int32                            0+
      host               string                           0+
      port               int32                            0+
      rack               string                           0+  nullable=0+ default=null
"""
