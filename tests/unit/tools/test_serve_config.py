"""kfast serve's configuration defaults: the embedded single node hosts its
internal topics with one replica; a node of a multi-node cluster keeps
Kafka's defaults (3 replicas, 2 in sync for transactions)."""

from kfast.tools.serve import build_config

INTERNAL = (
    "offsets.topic.replication.factor",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
)


def internal(config) -> tuple:
    return tuple(config[key] for key in INTERNAL)


def test_the_embedded_single_node_hosts_internal_topics_on_itself():
    assert internal(build_config(None, [])) == (1, 1, 1)
    assert internal(build_config(None, ["controller.quorum.voters=1@127.0.0.1:9093"])) == (1, 1, 1)


def test_a_cluster_node_keeps_kafkas_defaults():
    voters = "controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"
    assert internal(build_config(None, [voters])) == (3, 3, 2)
    broker_only = build_config(None, [voters, "process.roles=broker", "node.id=4"])
    assert internal(broker_only) == (3, 3, 2)


def test_explicit_values_win():
    assert internal(build_config(None, ["offsets.topic.replication.factor=2"]))[0] == 2


def test_a_combined_node_of_a_dynamic_quorum_is_a_cluster_node():
    """No voters but controller.quorum.bootstrap.servers: a KIP-853 node of a
    cluster, not the embedded single node."""
    from kfast.server.raft_server import KafkaRaftServer
    from kfast.tools.serve import new_server

    config = build_config(
        None,
        [
            "controller.quorum.bootstrap.servers=127.0.0.1:9093",
            "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        ],
    )
    assert internal(config) == (3, 3, 2)
    assert isinstance(new_server(config), KafkaRaftServer)
