"""OffsetDelete (API key 47).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id             string                          0+
    topics               []OffsetDeleteRequestTopic      0+
      name               string                          0+
      partitions         []OffsetDeleteRequestPartition  0+
        partition_index  int32                           0+
"""

RESPONSE = """
    error_code           int16                            0+
    throttle_time_ms     int32                            0+  ignorable
    topics               []OffsetDeleteResponseTopic      0+
      name               string                           0+
      partitions         []OffsetDeleteResponsePartition  0+
        partition_index  int32                            0+
        error_code       int16                            0+
"""
