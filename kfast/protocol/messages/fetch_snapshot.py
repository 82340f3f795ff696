"""FetchSnapshot (API key 59).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    cluster_id                string               0+  nullable=0+ tag=0 tagged=0+ default=null
    replica_id                int32                0+  default=-1
    max_bytes                 int32                0+  default=0x7fffffff
    topics                    []TopicSnapshot      0+
      name                    string               0+
      partitions              []PartitionSnapshot  0+
        partition             int32                0+
        current_leader_epoch  int32                0+
        snapshot_id           SnapshotId           0+
          end_offset          int64                0+
          epoch               int32                0+
        position              int64                0+
        replica_directory_id  uuid                 1+  tag=0 tagged=1+ ignorable
"""

RESPONSE = """
    throttle_time_ms       int32                0+  ignorable
    error_code             int16                0+
    topics                 []TopicSnapshot      0+
      name                 string               0+
      partitions           []PartitionSnapshot  0+
        index              int32                0+
        error_code         int16                0+
        snapshot_id        SnapshotId           0+
          end_offset       int64                0+
          epoch            int32                0+
        current_leader     LeaderIdAndEpoch     0+  tag=0 tagged=0+
          leader_id        int32                0+
          leader_epoch     int32                0+
        size               int64                0+
        position           int64                0+
        unaligned_records  records              0+
    node_endpoints         []NodeEndpoint       1+  tag=0 tagged=1+
      node_id              int32                1+
      host                 string               1+
      port                 uint16               1+
"""
