"""CreatePartitions (API key 37).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    topics          []CreatePartitionsTopic       0+
      name          string                        0+
      count         int32                         0+
      assignments   []CreatePartitionsAssignment  0+  nullable=0+
        broker_ids  []int32                       0+
    timeout_ms      int32                         0+
    validate_only   bool                          0+
"""

RESPONSE = """
    throttle_time_ms  int32                          0+
    results           []CreatePartitionsTopicResult  0+
      name            string                         0+
      error_code      int16                          0+
      error_message   string                         0+  nullable=0+ default=null
"""
