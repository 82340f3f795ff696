"""ListPartitionReassignments (API key 46).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    timeout_ms           int32                               0+  default=60000
    topics               []ListPartitionReassignmentsTopics  0+  nullable=0+ default=null
      name               string                              0+
      partition_indexes  []int32                             0+
"""

RESPONSE = """
    throttle_time_ms       int32                           0+
    error_code             int16                           0+
    error_message          string                          0+  nullable=0+
    topics                 []OngoingTopicReassignment      0+
      name                 string                          0+
      partitions           []OngoingPartitionReassignment  0+
        partition_index    int32                           0+
        replicas           []int32                         0+
        adding_replicas    []int32                         0+
        removing_replicas  []int32                         0+
"""
