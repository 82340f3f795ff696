"""WriteTxnMarkers (API key 27).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    markers                []WritableTxnMarker       0+
      producer_id          int64                     0+
      producer_epoch       int16                     0+
      transaction_result   bool                      0+
      topics               []WritableTxnMarkerTopic  0+
        name               string                    0+
        partition_indexes  []int32                   0+
      coordinator_epoch    int32                     0+
      transaction_version  int8                      2+  default=0 ignorable
"""

RESPONSE = """
    markers                []WritableTxnMarkerResult           0+
      producer_id          int64                               0+
      topics               []WritableTxnMarkerTopicResult      0+
        name               string                              0+
        partitions         []WritableTxnMarkerPartitionResult  0+
          partition_index  int32                               0+
          error_code       int16                               0+
"""
