"""StreamsGroupDescribe (API key 89).

Field grammar: kfast.protocol.schema; versions, flexible versions and
listeners: kfast.protocol.api_keys.
"""

REQUEST = """
    group_ids                      []string                     0+
    include_authorized_operations  bool                         0+
"""

RESPONSE = """
    throttle_time_ms               int32                        0+
    groups                         []DescribedGroup             0+
      error_code                   int16                        0+
      error_message                string                       0+    nullable=0+ default=null
      group_id                     string                       0+
      group_state                  string                       0+
      group_epoch                  int32                        0+
      assignment_epoch             int32                        0+
      topology                     Topology                     0+    nullable=0+ default=null
        epoch                      int32                        0+
        subtopologies              []Subtopology                0+    nullable=0+ default=null
          subtopology_id           string                       0+
          source_topics            []string                     0+
          repartition_sink_topics  []string                     0+
          state_changelog_topics   []TopicInfo                  0+
            name                   string                       0+
            partitions             int32                        0+
            replication_factor     int16                        0+
            topic_configs          []KeyValue                   0+
              key                  string                       0+
              value                string                       0+
          repartition_source_topics []TopicInfo                  0+
            name                   string                       0+
            partitions             int32                        0+
            replication_factor     int16                        0+
            topic_configs          []KeyValue                   0+
              key                  string                       0+
              value                string                       0+
      members                      []Member                     0+
        member_id                  string                       0+
        member_epoch               int32                        0+
        instance_id                string                       0+    nullable=0+ default=null
        rack_id                    string                       0+    nullable=0+ default=null
        client_id                  string                       0+
        client_host                string                       0+
        topology_epoch             int32                        0+
        process_id                 string                       0+
        user_endpoint              Endpoint                     0+    nullable=0+ default=null
          host                     string                       0+
          port                     uint16                       0+
        client_tags                []KeyValue                   0+
          key                      string                       0+
          value                    string                       0+
        task_offsets               []TaskOffset                 0+
          subtopology_id           string                       0+
          partition                int32                        0+
          offset                   int64                        0+
        task_end_offsets           []TaskOffset                 0+
          subtopology_id           string                       0+
          partition                int32                        0+
          offset                   int64                        0+
        assignment                 Assignment                   0+
          active_tasks             []TaskIds                    0+
            subtopology_id         string                       0+
            partitions             []int32                      0+
          standby_tasks            []TaskIds                    0+
            subtopology_id         string                       0+
            partitions             []int32                      0+
          warmup_tasks             []TaskIds                    0+
            subtopology_id         string                       0+
            partitions             []int32                      0+
        target_assignment          Assignment                   0+
          active_tasks             []TaskIds                    0+
            subtopology_id         string                       0+
            partitions             []int32                      0+
          standby_tasks            []TaskIds                    0+
            subtopology_id         string                       0+
            partitions             []int32                      0+
          warmup_tasks             []TaskIds                    0+
            subtopology_id         string                       0+
            partitions             []int32                      0+
        is_classic                 bool                         0+
      authorized_operations        int32                        0+    default=-2147483648
"""
