"""KfastCluster: a KRaft controller quorum of real ``kfast serve`` processes.

    with KfastCluster(controllers=3) as cluster:   # combined=True: brokers too
        leader = cluster.wait_for_leader()           # node id of the active controller
        cluster.kill(leader)                         # kill -9
        cluster.wait_until(lambda: cluster.leader() not in (None, leader))
        cluster.isolate(2)                           # its links drop every byte
        cluster.heal()
        cluster.restart(leader)

Each node is a separate process on 127.0.0.1 with its own free port and
data directory, started from a server.properties the cluster writes. Nodes
reach each other only through FaultProxy links (one per direction), so a
test can partition the network while the processes run. With
``combined=True`` every node is also a broker (process.roles=broker,
controller) with a client listener of its own (``bootstrap_servers``);
clients reach brokers directly, not through the proxies. Everything the
cluster started is killed and removed by ``close()`` (the context manager
calls it), also when a test fails.

Partitions: ``partition_state(topic)`` (leader, epoch, replicas, ISR from
Metadata), ``wait_for_isr``, ``replica_log(node, topic, partition)`` (a
replica's bytes) and ``wait_for_identical_replicas``; ``pause``/``resume``
freeze a node (SIGSTOP/SIGCONT), a follower that stops fetching.

Replication links: with ``replication_links=True`` the brokers' replica
fetches go through FaultProxy links too, one per (follower, leader) pair,
so ``stop_replication(node)`` makes a live follower (heartbeating, not
fenced) stop getting data and fall out of the ISR, ``slow_replication(node,
delay)`` delays it, and ``isolate``/``partition``/``heal`` cover
replication traffic as well. This is Kafka configuration, not a test hook:
each broker has one listener per possible follower, ``REPLICATION_FROM_<f>``,
advertised at the proxy of the link f -> that broker, and follower f fetches
on inter.broker.listener.name=REPLICATION_FROM_<f>.

Dynamic quorums (KIP-853): ``dynamic_quorum="standalone"`` formats node 1
with ``kfast storage format --standalone`` and the other controllers with
``--no-initial-controllers`` (they start as observers, to be added with
``kfast metadata-quorum add-controller``); ``dynamic_quorum="initial"``
formats every controller with ``--initial-controllers`` naming them all.
With ``combined=True`` the controllers are brokers too.
The nodes have no controller.quorum.voters, only
controller.quorum.bootstrap.servers (``controller_bootstrap``), and reach
each other at the endpoints the voter set publishes -- their own listeners,
so the FaultProxy links (isolate, partition) do not stand between them;
kill, restart, pause work as for a static quorum. ``directory_id(node)`` is
the directory id a node votes with.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import NamedTuple

from kfast.storage.meta_properties import random_uuid_base64
from kfast.testing.ports import free_port
from kfast.testing.proxy import DROP, PASS, RESET, FaultProxy

_READY_TIMEOUT_S = 30.0


def _replication_listener(follower: int) -> str:
    return f"REPLICATION_FROM_{follower}"


class PartitionInfo(NamedTuple):
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class ClusterNode:
    def __init__(
        self, node_id: int, port: int | None, data_dir: str, broker_port: int | None = None
    ):
        self.node_id = node_id
        self.port = port  # the controller listener (None: a broker-only node)
        self.broker_port = broker_port  # the client listener of a combined node
        self.data_dir = data_dir
        self.config_path = os.path.join(data_dir, "server.properties")
        self.log_path = os.path.join(data_dir, "kfast.log")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def alive(self) -> bool:
        return self.running is not None

    @property
    def running(self) -> subprocess.Popen[bytes] | None:
        """The node's process while it runs."""
        process = self.process
        return process if process is not None and process.poll() is None else None


class KfastCluster:
    def __init__(
        self,
        controllers: int = 3,
        overrides: dict | None = None,
        base_dir: str | None = None,
        combined: bool = False,
        brokers: int = 0,
        node_overrides: dict[int, dict] | None = None,
        replication_links: bool = False,
        dynamic_quorum: str | None = None,
        add_scram: list[str] | None = None,
    ):
        """``overrides``: properties for every node; ``node_overrides``: per
        node id, over those (``{4: {"broker.rack": "a"}}``);
        ``replication_links``: replica fetches through proxies;
        ``dynamic_quorum``: "standalone" or "initial" (module doc);
        ``add_scram``: ``kfast storage format --add-scram`` arguments every
        node is formatted with before its first start."""
        if dynamic_quorum not in (None, "standalone", "initial"):
            raise ValueError(f"dynamic_quorum is 'standalone' or 'initial', not {dynamic_quorum!r}")
        if dynamic_quorum and replication_links:
            raise ValueError("a dynamic quorum's nodes reach each other without proxies")
        self.dynamic_quorum = dynamic_quorum
        self.add_scram = list(add_scram or ())
        self._formatted = False
        self.combined = combined
        self.node_overrides = {k: dict(v) for k, v in (node_overrides or {}).items()}
        self._own_dir = base_dir is None
        self.base_dir = base_dir or tempfile.mkdtemp(prefix="kfast-cluster-")
        self.cluster_id = random_uuid_base64()  # never "-..." (a CLI option to argparse)
        self.overrides = dict(overrides or {})
        self.nodes: dict[int, ClusterNode] = {}
        self.controller_ids = tuple(range(1, controllers + 1))
        for node_id in range(1, controllers + brokers + 1):
            data_dir = os.path.join(self.base_dir, f"node-{node_id}")
            os.makedirs(data_dir, exist_ok=True)
            is_controller = node_id in self.controller_ids
            self.nodes[node_id] = ClusterNode(
                node_id,
                free_port() if is_controller else None,
                data_dir,
                free_port() if combined or not is_controller else None,
            )
        # links[(a, b)]: the proxy node a uses to reach controller b (a
        # dynamic quorum's nodes reach each other at the voter set's endpoints).
        self.links: dict[tuple[int, int], FaultProxy] = {}
        for a in self.nodes if not dynamic_quorum else ():
            for b in self.controller_ids:
                if a != b:
                    self.links[(a, b)] = FaultProxy(self.controller_port(b)).start()
        # replica_links[(f, b)]: the proxy follower f fetches from broker b
        # through; replica_ports[(f, b)]: b's REPLICATION_FROM_<f> listener.
        self.replica_links: dict[tuple[int, int], FaultProxy] = {}
        self.replica_ports: dict[tuple[int, int], int] = {}
        if replication_links:
            broker_ids = [n for n, node in self.nodes.items() if node.broker_port]
            for b in broker_ids:
                for f in broker_ids:
                    self.replica_ports[(f, b)] = free_port()
                    if f != b:
                        self.replica_links[(f, b)] = FaultProxy(self.replica_ports[(f, b)]).start()
        for node in self.nodes.values():
            self._write_config(node)

    @property
    def controller_bootstrap(self) -> str:
        """host:port of every controller (--bootstrap-controller)."""
        return ",".join(f"127.0.0.1:{self.nodes[n].port}" for n in self.controller_ids)

    def _write_dynamic_config(self, node: ClusterNode) -> None:
        roles = (["broker"] if node.broker_port else []) + (["controller"] if node.port else [])
        listeners = ([f"PLAINTEXT://127.0.0.1:{node.broker_port}"] if node.broker_port else []) + (
            [f"CONTROLLER://127.0.0.1:{node.port}"] if node.port else []
        )
        properties = {
            "process.roles": ",".join(roles),
            "node.id": node.node_id,
            "controller.quorum.bootstrap.servers": self.controller_bootstrap,
            "controller.listener.names": "CONTROLLER",
            "listeners": ",".join(listeners),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": os.path.join(node.data_dir, "data"),
            "cluster.id": self.cluster_id,
        }
        self._write_properties(node, properties)

    def _write_properties(self, node: ClusterNode, properties: dict) -> None:
        """The internal topics as replicated as the cluster allows (Kafka's
        defaults, 3 replicas and 2 in sync, need three brokers), the
        overrides over them, written as ``node``'s server.properties."""
        brokers = sum(1 for n in self.nodes.values() if n.broker_port)
        if brokers:
            properties["offsets.topic.replication.factor"] = min(3, brokers)
            properties["transaction.state.log.replication.factor"] = min(3, brokers)
            properties["transaction.state.log.min.isr"] = min(2, brokers)
        properties.update(self.overrides)
        properties.update(self.node_overrides.get(node.node_id, {}))
        with open(node.config_path, "w", encoding="utf-8") as f:
            f.writelines(f"{key}={value}\n" for key, value in properties.items())

    def _format(self) -> None:
        """kfast storage format, as an operator starting a dynamic quorum or
        adding SCRAM credentials would."""
        from kfast.tools.storage import format_storage, register

        parser = argparse.ArgumentParser()
        register(parser.add_subparsers())
        initial = ",".join(
            f"{n}@127.0.0.1:{self.nodes[n].port}:{random_uuid_base64()}"
            for n in self.controller_ids
        )
        for node_id in self.nodes:
            argv = [
                "storage",
                "format",
                f"--cluster-id={self.cluster_id}",
                "--config",
                self.nodes[node_id].config_path,
            ]
            argv += [f"--add-scram={argument}" for argument in self.add_scram]
            if node_id not in self.controller_ids or not self.dynamic_quorum:
                pass  # a broker or a static voter: no voter set
            elif self.dynamic_quorum == "initial":
                argv += ["--initial-controllers", initial]
            elif node_id == self.controller_ids[0]:
                argv += ["--standalone"]
            else:
                argv += ["--no-initial-controllers"]
            if format_storage(parser.parse_args(argv)) != 0:
                raise RuntimeError(f"kfast storage format failed for node {node_id}")
        self._formatted = True

    def directory_id(self, node_id: int) -> str:
        """The directory id node ``node_id``'s metadata log dir was formatted with."""
        from kfast.storage.meta_properties import read_meta_properties

        meta = read_meta_properties(os.path.join(self.nodes[node_id].data_dir, "data"))
        if meta is None or meta.directory_id is None:
            raise RuntimeError(f"node {node_id}'s metadata log dir is not formatted")
        return meta.directory_id

    def _write_config(self, node: ClusterNode) -> None:
        if self.dynamic_quorum:
            self._write_dynamic_config(node)
            return
        voters = ",".join(
            f"{other}@127.0.0.1:{self.nodes[other].port if other == node.node_id else self.links[(node.node_id, other)].port}"
            for other in self.controller_ids
        )
        roles = (["broker"] if node.broker_port else []) + (["controller"] if node.port else [])
        listeners = ([f"PLAINTEXT://127.0.0.1:{node.broker_port}"] if node.broker_port else []) + (
            [f"CONTROLLER://127.0.0.1:{node.port}"] if node.port else []
        )
        protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
        properties = {
            "process.roles": ",".join(roles),
            "node.id": node.node_id,
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "log.dirs": os.path.join(node.data_dir, "data"),
            "cluster.id": self.cluster_id,
        }
        replication = self._replication_listeners(node.node_id)
        if replication:
            listeners += [f"{name}://127.0.0.1:{port}" for name, port, _ in replication]
            protocols += [f"{name}:PLAINTEXT" for name, _, _ in replication]
            properties["advertised.listeners"] = ",".join(
                [f"PLAINTEXT://127.0.0.1:{node.broker_port}"]
                + [f"{name}://127.0.0.1:{advertised}" for name, _, advertised in replication]
            )
            properties["inter.broker.listener.name"] = _replication_listener(node.node_id)
        properties["listeners"] = ",".join(listeners)
        properties["listener.security.protocol.map"] = ",".join(protocols)
        self._write_properties(node, properties)

    def _replication_listeners(self, broker_id: int) -> list[tuple[str, int, int]]:
        """(listener name, bound port, advertised port) of ``broker_id``'s
        REPLICATION_FROM_<f> listeners; its own one is advertised as bound
        (nothing fetches from itself, but Kafka wants the inter-broker
        listener among a broker's advertised ones)."""
        return [
            (_replication_listener(f), port, port if f == b else self.replica_links[(f, b)].port)
            for (f, b), port in sorted(self.replica_ports.items())
            if b == broker_id
        ]

    @property
    def bootstrap_servers(self) -> str:
        """The brokers' client listeners (combined nodes)."""
        return ",".join(f"127.0.0.1:{n.broker_port}" for n in self.nodes.values() if n.broker_port)

    # -- processes ------------------------------------------------------------------------
    def start(self) -> KfastCluster:
        if (self.dynamic_quorum or self.add_scram) and not self._formatted:
            self._format()
        for node_id in self.nodes:
            self.start_node(node_id)
        for node_id in self.nodes:
            self.wait_listening(node_id)
        if any(n.broker_port for n in self.nodes.values()):
            self.wait_for_brokers()
        return self

    def start_node(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.alive:
            return
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        with open(node.log_path, "ab") as log:
            node.process = subprocess.Popen(
                [sys.executable, "-m", "kfast", "serve", "--config", node.config_path],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )

    def wait_listening(self, node_id: int, timeout: float = _READY_TIMEOUT_S) -> None:
        node = self.nodes[node_id]

        def listening():
            if not node.alive:
                raise RuntimeError(
                    f"node {node_id} exited with {node.process.returncode}:\n"
                    f"{self.log_tail(node_id)}"
                )
            ports = [p for p in (node.port, node.broker_port) if p]
            try:
                for port in ports:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                        pass
                return True
            except OSError:
                return False

        self.wait_until(listening, timeout, f"node {node_id} listening")

    def kill(self, node_id: int) -> None:
        """kill -9."""
        process = self.nodes[node_id].running
        if process is not None:
            process.send_signal(signal.SIGKILL)
            process.wait(10)

    def stop(self, node_id: int, timeout: float = 30.0) -> int:
        """SIGTERM and wait; the exit status."""
        node = self.nodes[node_id]
        process = node.running
        if process is not None:
            process.send_signal(signal.SIGCONT)  # a paused node could not stop
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if node.process is None:
            raise RuntimeError(f"node {node_id} was never started")
        return node.process.returncode

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the process stays, silent (no fetches, no heartbeats) --
        a follower frozen by a GC pause or a stalled disk."""
        process = self.nodes[node_id].running
        if process is not None:
            process.send_signal(signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        process = self.nodes[node_id].running
        if process is not None:
            process.send_signal(signal.SIGCONT)

    def restart(self, node_id: int) -> None:
        self.kill(node_id)
        self.start_node(node_id)
        self.wait_listening(node_id)

    def log_tail(self, node_id: int, lines: int = 40) -> str:
        try:
            with open(self.nodes[node_id].log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    # -- network faults -------------------------------------------------------------------
    def _all_links(self):
        yield from self.links.items()
        yield from self.replica_links.items()

    def isolate(self, node_id: int, mode: str = DROP) -> None:
        """Cut ``node_id`` off from the controllers (and, with replication
        links, from the other brokers' replication), both directions."""
        for (a, b), proxy in self._all_links():
            if node_id in (a, b):
                proxy.set_mode(mode)

    def partition(self, side: set[int], mode: str = DROP) -> None:
        for (a, b), proxy in self._all_links():
            if (a in side) != (b in side):
                proxy.set_mode(mode)

    def cut(self, source: int, target: int, mode: str = DROP) -> None:
        """Break only the connections ``source`` opens to ``target`` (its
        controller RPCs and, with replication links, its replica fetches);
        ``target`` still reaches ``source``: one-way reachability."""
        for (a, b), proxy in self._all_links():
            if (a, b) == (source, target):
                proxy.set_mode(mode)

    def heal(self) -> None:
        for _, proxy in self._all_links():
            proxy.set_mode(PASS)
            proxy.delay = 0.0

    def replication_link(self, follower: int, leader: int) -> FaultProxy:
        """The proxy ``follower``'s replica fetches from ``leader`` go through."""
        if not self.replica_links:
            raise RuntimeError(
                "KfastCluster(replication_links=True) routes replication through proxies"
            )
        return self.replica_links[(follower, leader)]

    def _follower_links(self, follower: int):
        return [self.replication_link(follower, b) for f, b in self.replica_links if f == follower]

    def stop_replication(self, follower: int, mode: str = DROP) -> None:
        """``follower`` stays up and registered but gets nothing from any
        leader: with DROP its fetches vanish (it leaves the ISRs after
        replica.lag.time.max.ms); RESET refuses its connections."""
        for proxy in self._follower_links(follower):
            proxy.set_mode(mode)

    def slow_replication(self, follower: int, delay: float) -> None:
        """Every chunk between ``follower`` and its leaders waits ``delay`` s
        each way: a slow follower (acks=all waits for it while it is in sync)."""
        for proxy in self._follower_links(follower):
            proxy.delay = delay

    def resume_replication(self, follower: int) -> None:
        for proxy in self._follower_links(follower):
            proxy.set_mode(PASS)
            proxy.delay = 0.0

    # -- the quorum ------------------------------------------------------------------------
    def connect(self, node_id: int, **kwargs):
        from kfast.client.connection import BlockingConnection

        return BlockingConnection("127.0.0.1", self.controller_port(node_id), **kwargs)

    def controller_port(self, node_id: int) -> int:
        """The controller listener's port of node ``node_id``."""
        port = self.nodes[node_id].port
        if port is None:
            raise ValueError(f"node {node_id} is a broker-only node: no controller listener")
        return port

    def describe_quorum(self, node_id: int, timeout: float = 5.0):
        """DescribeQuorum's partition data from ``node_id``, or None if it
        is down or does not lead the quorum."""
        from kfast.protocol import DescribeQuorumRequest

        if not self.nodes[node_id].alive:
            return None
        request = DescribeQuorumRequest(
            topics=[
                DescribeQuorumRequest.TopicData(
                    topic_name="__cluster_metadata",
                    partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)],
                )
            ]
        )
        try:
            with self.connect(node_id, request_timeout=timeout) as connection:
                response = connection.send(request)
        except Exception:
            return None
        if response.error_code or not response.topics:
            return None
        partition = response.topics[0].partitions[0]
        return partition if partition.error_code == 0 else None

    def leader(self, exclude=()) -> int | None:
        """The node that answers DescribeQuorum as the quorum's leader (an
        isolated old leader may still think it leads: ``exclude`` it)."""
        for node_id in self.controller_ids:
            if node_id in exclude:
                continue
            state = self.describe_quorum(node_id, timeout=2.0)
            if state is not None and state.leader_id == node_id:
                return node_id
        return None

    def _metadata(self, request, via: int | None):
        """A Metadata response from ``via`` or the first live broker that
        answers; None if none does."""
        from kfast.client.connection import BlockingConnection

        nodes = (
            [self.nodes[via]]
            if via is not None
            else [n for n in self.nodes.values() if n.alive and n.broker_port]
        )
        for node in nodes:
            if node.broker_port is None:  # a controller-only node answers no Metadata
                continue
            try:
                with BlockingConnection(
                    "127.0.0.1", node.broker_port, request_timeout=2
                ) as connection:
                    return connection.send(request)
            except Exception:
                continue
        return None

    def brokers(self, via: int | None = None) -> set[int]:
        """The broker ids a Metadata request lists (combined nodes), asked of
        ``via`` or of the first live node; empty if none answers."""
        from kfast.protocol import MetadataRequest

        response = self._metadata(MetadataRequest(topics=[]), via)
        return set() if response is None else {b.node_id for b in response.brokers}

    # -- partitions ---------------------------------------------------------------------
    def partition_state(self, topic: str, via: int | None = None) -> dict:
        """{partition: PartitionInfo(leader, leader_epoch, replicas, isr)}
        from a live broker's Metadata; empty if none answers."""
        from kfast.protocol import MetadataRequest

        response = self._metadata(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                allow_auto_topic_creation=False,
            ),
            via,
        )
        if response is None:
            return {}
        return {
            p.partition_index: PartitionInfo(
                p.leader_id, p.leader_epoch, tuple(p.replica_nodes), tuple(p.isr_nodes)
            )
            for t in response.topics
            if t.error_code == 0
            for p in t.partitions
        }

    def wait_for_isr(
        self, topic: str, partition: int, isr: set[int], timeout: float = _READY_TIMEOUT_S
    ) -> None:
        self.wait_until(
            lambda: set(getattr(self.partition_state(topic).get(partition), "isr", ())) == isr,
            timeout,
            f"the ISR of {topic}-{partition} = {sorted(isr)}",
        )

    def replica_log(self, node_id: int, topic: str, partition: int) -> bytes:
        """Every record batch of ``node_id``'s replica, segments in order."""
        directory = os.path.join(self.nodes[node_id].data_dir, "data", f"{topic}-{partition}")
        names = sorted(n for n in os.listdir(directory) if n.endswith(".log"))
        data = b""
        for name in names:
            with open(os.path.join(directory, name), "rb") as f:
                data += f.read()
        return data

    def wait_for_identical_replicas(
        self, topic: str, partition: int, nodes, timeout: float = _READY_TIMEOUT_S
    ) -> bytes:
        """Until the replicas on ``nodes`` hold the same bytes; returns them."""
        found: list[bytes] = []

        def identical():
            logs = {self.replica_log(n, topic, partition) for n in nodes}
            found[:] = list(logs)
            return len(logs) == 1

        self.wait_until(identical, timeout, f"identical replicas of {topic}-{partition}")
        return found[0]

    def wait_for_brokers(
        self, expected: set[int] | None = None, timeout: float = _READY_TIMEOUT_S
    ) -> None:
        """Until every live node's Metadata lists ``expected`` (default: the
        live nodes) as the cluster's brokers."""

        def listed():
            want = (
                expected
                if expected is not None
                else {n.node_id for n in self.nodes.values() if n.alive and n.broker_port}
            )
            return all(
                self.brokers(n.node_id) == want
                for n in self.nodes.values()
                if n.alive and n.broker_port
            )

        self.wait_until(listed, timeout, "the brokers in service")

    def wait_for_leader(self, timeout: float = _READY_TIMEOUT_S, exclude=()) -> int:
        found: list[int] = []

        def elected():
            leader = self.leader(exclude)
            if leader is not None:
                found.append(leader)
                return True
            return False

        self.wait_until(elected, timeout, "a quorum leader")
        return found[-1]

    def wait_until(
        self,
        predicate: Callable[[], bool],
        timeout: float = _READY_TIMEOUT_S,
        what: str = "the condition",
    ) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if predicate():
                return
            if time.monotonic() >= deadline:
                logs = "\n".join(f"--- node {n} ---\n{self.log_tail(n)}" for n in self.nodes)
                raise TimeoutError(f"{what} not reached within {timeout} s\n{logs}")
            time.sleep(0.05)

    # -- cleanup ----------------------------------------------------------------------------
    def close(self) -> None:
        for node_id in self.nodes:
            self.kill(node_id)
        for _, proxy in self._all_links():
            proxy.close()
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> KfastCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc_info) -> None:
        self.close()


__all__ = ["KfastCluster", "ClusterNode", "PartitionInfo", "DROP", "RESET", "PASS"]
