"""DeleteRecords (API key 21).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    topics               []DeleteRecordsTopic      0+
      name               string                    0+
      partitions         []DeleteRecordsPartition  0+
        partition_index  int32                     0+
        offset           int64                     0+
    timeout_ms           int32                     0+
"""

RESPONSE = """
    throttle_time_ms     int32                           0+
    topics               []DeleteRecordsTopicResult      0+
      name               string                          0+
      partitions         []DeleteRecordsPartitionResult  0+
        partition_index  int32                           0+
        low_watermark    int64                           0+
        error_code       int16                           0+
"""
