"""BeginQuorumEpoch (API key 53).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    cluster_id              string            0+  nullable=0+ default=null
    voter_id                int32             1+  default=-1 ignorable
    topics                  []TopicData       0+
      topic_name            string            0+
      partitions            []PartitionData   0+
        partition_index     int32             0+
        voter_directory_id  uuid              1+  ignorable
        leader_id           int32             0+
        leader_epoch        int32             0+
    leader_endpoints        []LeaderEndpoint  1+  ignorable
      name                  string            1+
      host                  string            1+
      port                  uint16            1+
"""

RESPONSE = """
    error_code           int16            0+
    topics               []TopicData      0+
      topic_name         string           0+
      partitions         []PartitionData  0+
        partition_index  int32            0+
        error_code       int16            0+
        leader_id        int32            0+
        leader_epoch     int32            0+
    node_endpoints       []NodeEndpoint   1+  tag=0 tagged=1+
      node_id            int32            1+
      host               string           1+
      port               uint16           1+
"""
