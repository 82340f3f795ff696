"""AddPartitionsToTxn (API key 24).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    transactions                   []AddPartitionsToTxnTransaction  4+
      transactional_id             string                           4+
      producer_id                  int64                            4+
      producer_epoch               int16                            4+
      verify_only                  bool                             4+   default=false
      topics                       []AddPartitionsToTxnTopic        4+
        name                       string                           0+
        partitions                 []int32                          0+
    v3_and_below_transactional_id  string                           0-3
    v3_and_below_producer_id       int64                            0-3
    v3_and_below_producer_epoch    int16                            0-3
    v3_and_below_topics            []AddPartitionsToTxnTopic        0-3
      name                         string                           0+
      partitions                   []int32                          0+
"""

RESPONSE = """
    throttle_time_ms               int32                                0+
    error_code                     int16                                4+   ignorable
    results_by_transaction         []AddPartitionsToTxnResult           4+
      transactional_id             string                               4+
      topic_results                []AddPartitionsToTxnTopicResult      4+
        name                       string                               0+
        results_by_partition       []AddPartitionsToTxnPartitionResult  0+
          partition_index          int32                                0+
          partition_error_code     int16                                0+
    results_by_topic_v3_and_below  []AddPartitionsToTxnTopicResult      0-3
      name                         string                               0+
      results_by_partition         []AddPartitionsToTxnPartitionResult  0+
        partition_index            int32                                0+
        partition_error_code       int16                                0+
"""
