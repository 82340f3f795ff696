"""BrokerRegistration (API key 62).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    broker_id                int32       0+
    cluster_id               string      0+
    incarnation_id           uuid        0+
    listeners                []Listener  0+
      name                   string      0+
      host                   string      0+
      port                   uint16      0+
      security_protocol      int16       0+
    features                 []Feature   0+
      name                   string      0+
      min_supported_version  int16       0+
      max_supported_version  int16       0+
    rack                     string      0+  nullable=0+
    is_migrating_zk_broker   bool        1+  default=false
    log_dirs                 []uuid      2+  ignorable
    previous_broker_epoch    int64       3+  default=-1 ignorable
"""

RESPONSE = """
    throttle_time_ms  int32  0+
    error_code        int16  0+
    broker_epoch      int64  0+  default=-1
"""
