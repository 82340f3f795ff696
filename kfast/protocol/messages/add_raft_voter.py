"""AddRaftVoter (API key 80).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    cluster_id          string      0+  nullable=0+
    timeout_ms          int32       0+
    voter_id            int32       0+
    voter_directory_id  uuid        0+
    listeners           []Listener  0+
      name              string      0+
      host              string      0+
      port              uint16      0+
    ack_when_committed  bool        1+  default=true
"""

RESPONSE = """
    throttle_time_ms  int32   0+
    error_code        int16   0+
    error_message     string  0+  nullable=0+ ignorable
"""
