"""DescribeCluster (API key 60).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    include_cluster_authorized_operations  bool  0+
    endpoint_type                          int8  1+  default=1
    include_fenced_brokers                 bool  2+
"""

RESPONSE = """
    throttle_time_ms               int32                    0+
    error_code                     int16                    0+
    error_message                  string                   0+  nullable=0+ default=null
    endpoint_type                  int8                     1+  default=1
    cluster_id                     string                   0+
    controller_id                  int32                    0+  default=-1
    brokers                        []DescribeClusterBroker  0+
      broker_id                    int32                    0+
      host                         string                   0+
      port                         int32                    0+
      rack                         string                   0+  nullable=0+ default=null
      is_fenced                    bool                     2+
    cluster_authorized_operations  int32                    0+  default=-2147483648
"""
