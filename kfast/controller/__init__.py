"""The controller: cluster metadata as a log of records, and the state machines
(control managers) that turn admin requests into those records.

    quorum_controller.py        QuorumController: the state and the operations;
                                runs one operation at a time, commits its records,
                                replays them, publishes images
    raft_quorum_controller.py   RaftQuorumController: commits through the Raft log
    replication_control.py      topics, partitions, leaders/ISR, reassignments
    configuration_control.py    dynamic topic and broker config overrides
    cluster_control.py          broker registrations, epochs, fencing
    producer_id_control.py      producer id blocks
    feature_control.py          finalized feature levels (metadata.version, transaction.version)
    placement.py                replica placement (rack-aware)
    topics.py                   topic name rules (Kafka's Topic)
    snapshot.py                 the records of a metadata snapshot (image_records)
    config_describer.py         DescribeConfigs values, sources and synonyms
    metadata/image.py           MetadataImage / MetadataDelta (what brokers serve)
    metadata/records.py         metadata record schemas and their framing
"""
