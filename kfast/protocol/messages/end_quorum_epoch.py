"""EndQuorumEpoch (API key 54).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    cluster_id                    string            0+  nullable=0+ default=null
    topics                        []TopicData       0+
      topic_name                  string            0+
      partitions                  []PartitionData   0+
        partition_index           int32             0+
        leader_id                 int32             0+
        leader_epoch              int32             0+
        preferred_successors      []int32           0   ignorable
        preferred_candidates      []ReplicaInfo     1+  ignorable
          candidate_id            int32             1+
          candidate_directory_id  uuid              1+
    leader_endpoints              []LeaderEndpoint  1+  ignorable
      name                        string            1+
      host                        string            1+
      port                        uint16            1+
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
