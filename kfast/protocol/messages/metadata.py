"""Metadata (API key 3).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    topics                                 []MetadataRequestTopic  0+    nullable=1+
      topic_id                             uuid                    10+   ignorable
      name                                 string                  0+    nullable=10+
    allow_auto_topic_creation              bool                    4+    default=true
    include_cluster_authorized_operations  bool                    8-10
    include_topic_authorized_operations    bool                    8+
"""

RESPONSE = """
    throttle_time_ms               int32                        3+    ignorable
    brokers                        []MetadataResponseBroker     0+
      node_id                      int32                        0+
      host                         string                       0+
      port                         int32                        0+
      rack                         string                       1+    nullable=1+ default=null ignorable
    cluster_id                     string                       2+    nullable=2+ default=null ignorable
    controller_id                  int32                        1+    default=-1 ignorable
    topics                         []MetadataResponseTopic      0+
      error_code                   int16                        0+
      name                         string                       0+    nullable=12+
      topic_id                     uuid                         10+   ignorable
      is_internal                  bool                         1+    default=false ignorable
      partitions                   []MetadataResponsePartition  0+
        error_code                 int16                        0+
        partition_index            int32                        0+
        leader_id                  int32                        0+
        leader_epoch               int32                        7+    default=-1 ignorable
        replica_nodes              []int32                      0+
        isr_nodes                  []int32                      0+
        offline_replicas           []int32                      5+    ignorable
      topic_authorized_operations  int32                        8+    default=-2147483648
    cluster_authorized_operations  int32                        8-10  default=-2147483648
    error_code                     int16                        13+   ignorable
"""
