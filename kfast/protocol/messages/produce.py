"""Produce (API key 0).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    transactional_id  string                  3+    nullable=3+ default=null
    acks              int16                   0+
    timeout_ms        int32                   0+
    topic_data        []TopicProduceData      0+
      name            string                  0-12  ignorable
      topic_id        uuid                    13+   ignorable
      partition_data  []PartitionProduceData  0+
        index         int32                   0+
        records       records                 0+    nullable=0+
"""

RESPONSE = """
    responses                        []TopicProduceResponse       0+
      name                           string                       0-12  ignorable
      topic_id                       uuid                         13+   ignorable
      partition_responses            []PartitionProduceResponse   0+
        index                        int32                        0+
        error_code                   int16                        0+
        base_offset                  int64                        0+
        log_append_time_ms           int64                        2+    default=-1 ignorable
        log_start_offset             int64                        5+    default=-1 ignorable
        record_errors                []BatchIndexAndErrorMessage  8+    ignorable
          batch_index                int32                        8+
          batch_index_error_message  string                       8+    nullable=8+ default=null
        error_message                string                       8+    nullable=8+ default=null ignorable
        current_leader               LeaderIdAndEpoch             10+   tag=0 tagged=10+
          leader_id                  int32                        10+   default=-1
          leader_epoch               int32                        10+   default=-1
    throttle_time_ms                 int32                        1+    default=0 ignorable
    node_endpoints                   []NodeEndpoint               10+   tag=0 tagged=10+
      node_id                        int32                        10+
      host                           string                       10+
      port                           int32                        10+
      rack                           string                       10+   nullable=10+ default=null
"""
