"""DeleteShareGroupOffsets (API key 92).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id                       string                       0+
    topics                         []DeleteShareGroupOffsetsRequestTopic 0+
      topic_name                   string                       0+
"""

RESPONSE = """
    throttle_time_ms               int32                        0+
    error_code                     int16                        0+
    error_message                  string                       0+    nullable=0+ default=null
    responses                      []DeleteShareGroupOffsetsResponseTopic 0+
      topic_name                   string                       0+
      topic_id                     uuid                         0+
      error_code                   int16                        0+
      error_message                string                       0+    nullable=0+ default=null
"""
