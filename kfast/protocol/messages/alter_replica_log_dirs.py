"""AlterReplicaLogDirs (API key 34).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    dirs            []AlterReplicaLogDir       0+
      path          string                     0+
      topics        []AlterReplicaLogDirTopic  0+
        name        string                     0+
        partitions  []int32                    0+
"""

RESPONSE = """
    throttle_time_ms     int32                                0+
    results              []AlterReplicaLogDirTopicResult      0+
      topic_name         string                               0+
      partitions         []AlterReplicaLogDirPartitionResult  0+
        partition_index  int32                                0+
        error_code       int16                                0+
"""
