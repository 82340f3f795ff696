"""AssignReplicasToDirs (API key 73).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    broker_id              int32            0+
    broker_epoch           int64            0+  default=-1
    directories            []DirectoryData  0+
      id                   uuid             0+
      topics               []TopicData      0+
        topic_id           uuid             0+
        partitions         []PartitionData  0+
          partition_index  int32            0+
"""

RESPONSE = """
    throttle_time_ms       int32            0+
    error_code             int16            0+
    directories            []DirectoryData  0+
      id                   uuid             0+
      topics               []TopicData      0+
        topic_id           uuid             0+
        partitions         []PartitionData  0+
          partition_index  int32            0+
          error_code       int16            0+
"""
