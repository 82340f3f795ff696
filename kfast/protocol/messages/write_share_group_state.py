"""WriteShareGroupState (API key 85).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_id              string            0+
    topics                []WriteStateData  0+
      topic_id            uuid              0+
      partitions          []PartitionData   0+
        partition         int32             0+
        state_epoch       int32             0+
        leader_epoch      int32             0+
        start_offset      int64             0+
        delivery_complete_count  int32      1+  default=-1 ignorable
        state_batches     []StateBatch      0+
          first_offset    int64             0+
          last_offset     int64             0+
          delivery_state  int8              0+
          delivery_count  int16             0+
"""

RESPONSE = """
    results            []WriteStateResult  0+
      topic_id         uuid                0+
      partitions       []PartitionResult   0+
        partition      int32               0+
        error_code     int16               0+
        error_message  string              0+  nullable=0+ default=null
"""
