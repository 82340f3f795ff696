"""Fetch (API key 1).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    cluster_id                string            12+   nullable=12+ tag=0 tagged=12+ default=null ignorable
    replica_id                int32             0-14  default=-1
    replica_state             ReplicaState      15+   tag=1 tagged=15+
      replica_id              int32             15+   default=-1
      replica_epoch           int64             15+   default=-1
    max_wait_ms               int32             0+
    min_bytes                 int32             0+
    max_bytes                 int32             3+    default=0x7fffffff ignorable
    isolation_level           int8              4+    default=0 ignorable
    session_id                int32             7+    default=0 ignorable
    session_epoch             int32             7+    default=-1 ignorable
    topics                    []FetchTopic      0+
      topic                   string            0-12  ignorable
      topic_id                uuid              13+   ignorable
      partitions              []FetchPartition  0+
        partition             int32             0+
        current_leader_epoch  int32             9+    default=-1 ignorable
        fetch_offset          int64             0+
        last_fetched_epoch    int32             12+   default=-1
        log_start_offset      int64             5+    default=-1 ignorable
        partition_max_bytes   int32             0+
        replica_directory_id  uuid              17+   tag=0 tagged=17+ ignorable
        high_watermark        int64             18+   tag=1 tagged=18+ default=9223372036854775807 ignorable
    forgotten_topics_data     []ForgottenTopic  7+
      topic                   string            7-12  ignorable
      topic_id                uuid              13+   ignorable
      partitions              []int32           7+
    rack_id                   string            11+   default="" ignorable
"""

RESPONSE = """
    throttle_time_ms            int32                     1+    ignorable
    error_code                  int16                     7+    ignorable
    session_id                  int32                     7+    default=0
    responses                   []FetchableTopicResponse  0+
      topic                     string                    0-12  ignorable
      topic_id                  uuid                      13+   ignorable
      partitions                []PartitionData           0+
        partition_index         int32                     0+
        error_code              int16                     0+
        high_watermark          int64                     0+
        last_stable_offset      int64                     4+    default=-1 ignorable
        log_start_offset        int64                     5+    default=-1 ignorable
        diverging_epoch         EpochEndOffset            12+   tag=0 tagged=12+
          epoch                 int32                     12+   default=-1
          end_offset            int64                     12+   default=-1
        current_leader          LeaderIdAndEpoch          12+   tag=1 tagged=12+
          leader_id             int32                     12+   default=-1
          leader_epoch          int32                     12+   default=-1
        snapshot_id             SnapshotId                12+   tag=2 tagged=12+
          end_offset            int64                     0+    default=-1
          epoch                 int32                     0+    default=-1
        aborted_transactions    []AbortedTransaction      4+    nullable=4+ ignorable
          producer_id           int64                     4+
          first_offset          int64                     4+
        preferred_read_replica  int32                     11+   default=-1
        records                 records                   0+    nullable=0+
    node_endpoints              []NodeEndpoint            16+   tag=0 tagged=16+
      node_id                   int32                     16+
      host                      string                    16+
      port                      int32                     16+
      rack                      string                    16+   nullable=16+ default=null
"""
