"""DescribeTransactions (API key 65).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    transactional_ids  []string  0+
"""

RESPONSE = """
    throttle_time_ms             int32               0+
    transaction_states           []TransactionState  0+
      error_code                 int16               0+
      transactional_id           string              0+
      transaction_state          string              0+
      transaction_timeout_ms     int32               0+
      transaction_start_time_ms  int64               0+
      producer_id                int64               0+
      producer_epoch             int16               0+
      topics                     []TopicData         0+
        topic                    string              0+
        partitions               []int32             0+
"""
