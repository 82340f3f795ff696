"""FindCoordinator (API key 10).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    key               string    0-3
    key_type          int8      1+   default=0
    coordinator_keys  []string  4+
"""

RESPONSE = """
    throttle_time_ms  int32          1+   ignorable
    error_code        int16          0-3
    error_message     string         1-3  nullable=1-3 ignorable
    node_id           int32          0-3
    host              string         0-3
    port              int32          0-3
    coordinators      []Coordinator  4+
      key             string         4+
      node_id         int32          4+
      host            string         4+
      port            int32          4+
      error_code      int16          4+
      error_message   string         4+   nullable=4+ ignorable
"""
