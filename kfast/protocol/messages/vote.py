"""Vote (API key 52).

Version 2 adds pre_vote (KIP-996); Kafka 4.x calls the sender "replica"
(replica_epoch, replica_id, replica_directory_id) because a pre-vote is sent by a
prospective candidate, not a candidate.

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    cluster_id                  string           0+  nullable=0+ default=null
    voter_id                    int32            1+  default=-1 ignorable
    topics                      []TopicData      0+
      topic_name                string           0+
      partitions                []PartitionData  0+
        partition_index         int32            0+
        replica_epoch           int32            0+
        replica_id              int32            0+
        replica_directory_id    uuid             1+  ignorable
        voter_directory_id      uuid             1+  ignorable
        last_offset_epoch       int32            0+
        last_offset             int64            0+
        pre_vote                bool             2+
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
        vote_granted     bool             0+
    node_endpoints       []NodeEndpoint   1+  tag=0 tagged=1+
      node_id            int32            1+
      host               string           1+
      port               uint16           1+
"""
