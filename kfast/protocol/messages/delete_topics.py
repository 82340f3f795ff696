"""DeleteTopics (API key 20).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    topics       []DeleteTopicState  6+
      name       string              6+   nullable=6+ default=null
      topic_id   uuid                6+
    topic_names  []string            0-5  ignorable
    timeout_ms   int32               0+
"""

RESPONSE = """
    throttle_time_ms  int32                   1+  ignorable
    responses         []DeletableTopicResult  0+
      name            string                  0+  nullable=6+
      topic_id        uuid                    6+  ignorable
      error_code      int16                   0+
      error_message   string                  5+  nullable=5+ default=null ignorable
"""
