"""UpdateRaftVoter (API key 82).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    cluster_id               string               0+  nullable=0+
    current_leader_epoch     int32                0+
    voter_id                 int32                0+
    voter_directory_id       uuid                 0+
    listeners                []Listener           0+
      name                   string               0+
      host                   string               0+
      port                   uint16               0+
    k_raft_version_feature   KRaftVersionFeature  0+
      min_supported_version  int16                0+
      max_supported_version  int16                0+
"""

RESPONSE = """
    throttle_time_ms  int32          0+
    error_code        int16          0+
    current_leader    CurrentLeader  0+  tag=0 tagged=0+
      leader_id       int32          0+  default=-1
      leader_epoch    int32          0+  default=-1
      host            string         0+
      port            int32          0+
"""
