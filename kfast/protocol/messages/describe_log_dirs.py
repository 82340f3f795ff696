"""DescribeLogDirs (API key 35).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    topics        []DescribableLogDirTopic  0+  nullable=0+
      topic       string                    0+
      partitions  []int32                   0+
"""

RESPONSE = """
    throttle_time_ms       int32                       0+
    error_code             int16                       3+  ignorable
    results                []DescribeLogDirsResult     0+
      error_code           int16                       0+
      log_dir              string                      0+
      topics               []DescribeLogDirsTopic      0+
        name               string                      0+
        partitions         []DescribeLogDirsPartition  0+
          partition_index  int32                       0+
          partition_size   int64                       0+
          offset_lag       int64                       0+
          is_future_key    bool                        0+
      total_bytes          int64                       4+  default=-1 ignorable
      usable_bytes         int64                       4+  default=-1 ignorable
"""
