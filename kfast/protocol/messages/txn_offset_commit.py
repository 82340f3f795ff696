"""TxnOffsetCommit (API key 28).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    transactional_id            string                             0+
    group_id                    string                             0+
    producer_id                 int64                              0+
    producer_epoch              int16                              0+
    generation_id               int32                              3+  default=-1
    member_id                   string                             3+  default=""
    group_instance_id           string                             3+  nullable=3+ default=null
    topics                      []TxnOffsetCommitRequestTopic      0+
      name                      string                             0+
      partitions                []TxnOffsetCommitRequestPartition  0+
        partition_index         int32                              0+
        committed_offset        int64                              0+
        committed_leader_epoch  int32                              2+  default=-1 ignorable
        committed_metadata      string                             0+  nullable=0+
"""

RESPONSE = """
    throttle_time_ms     int32                               0+
    topics               []TxnOffsetCommitResponseTopic      0+
      name               string                              0+
      partitions         []TxnOffsetCommitResponsePartition  0+
        partition_index  int32                               0+
        error_code       int16                               0+
"""
