"""What the web console shows, asked of the cluster over the Kafka protocol
only (so it works against kfast, Apache Kafka or any compatible broker),
as JSON-ready dicts. Nothing here writes to the cluster.

    brokers and controller   DescribeCluster; DescribeQuorum when offered
    topics                   DescribeTopicPartitions or Metadata; ListOffsets;
                             DescribeLogDirs (sizes) from every broker;
                             DescribeConfigs
    consumer groups          ListGroups on every broker; FindCoordinator,
                             DescribeGroups, OffsetFetch at the coordinator;
                             ListOffsets for the lag
    messages                 ListOffsets (by timestamp) and Fetch

One ``ClusterQueries`` holds one kfast client ``Cluster`` (its connections
and metadata cache) for the console's life.
"""

from __future__ import annotations

import asyncio
import base64
import json

from kfast.client.admin import EARLIEST, LATEST, KafkaAdmin
from kfast.client.cluster import Cluster
from kfast.client.fetcher import Fetcher, decode_records
from kfast.coordinator.group.consumer_protocol import assigned_partitions
from kfast.protocol import (
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    DescribeQuorumRequest,
    FindCoordinatorRequest,
    ListGroupsRequest,
    OffsetFetchRequest,
    api_keys,
    errors,
)
from kfast.protocol.constants import CONFIG_RESOURCE_TOPIC

_METADATA_TOPIC = "__cluster_metadata"
# The last versions whose shapes these queries read: FindCoordinator v4+
# answers a list of coordinators, OffsetFetch v8+ batches groups.
_FIND_COORDINATOR_MAX = 3
_OFFSET_FETCH_MAX = 7
_GROUP_COORDINATOR_KEY = 0  # FindCoordinator key_type of a group
# Kafka's ConfigEntry.ConfigSource, by DescribeConfigs' config_source code.
_CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
_FETCH_MAX_WAIT_MS = 100
MAX_BROWSE = 500  # records one message-browser page may ask for


class QueryError(Exception):
    """An answer the console shows as an error (HTTP 4xx), not a crash."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _check(code: int, what: str) -> None:
    if code:
        raise QueryError(
            f"{what}: {errors.for_code(code).__name__}",
            404
            if code
            in (errors.UnknownTopicOrPartitionException.code, errors.GroupIdNotFoundException.code)
            else 502,
        )


def render_bytes(data: bytes | None) -> dict | None:
    """A key, value or header value three ways: UTF-8 text (None when not
    valid UTF-8), parsed JSON (None when not JSON), and hex."""
    if data is None:
        return None
    data = bytes(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    parsed = None
    if text is not None and text.strip()[:1] in ("{", "["):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
    return {
        "text": text,
        "json": parsed,
        "hex": data.hex(),
        "size": len(data),
        "base64": base64.b64encode(data).decode(),
    }


class ClusterQueries:
    def __init__(self, bootstrap_servers: str):
        self.cluster = Cluster(bootstrap_servers, client_id="kfast-console")
        self.admin = KafkaAdmin(cluster=self.cluster)
        # The browser reads only below the high watermark, so a fetch never
        # waits for this long; not 0, since Tansu 0.6 leaves the partition
        # out of a Fetch answer with max_wait_ms=0.
        self.fetcher = Fetcher(cluster=self.cluster, max_wait_ms=_FETCH_MAX_WAIT_MS)

    async def close(self) -> None:
        await self.cluster.close()

    async def _brokers(self) -> list[int]:
        await self.cluster.refresh_metadata([])
        return sorted(self.cluster.brokers)

    # ---- cluster ---------------------------------------------------------------------

    async def overview(self) -> dict:
        described = await self.admin.describe_cluster()
        quorum = await self.quorum()
        return {
            "cluster_id": described.cluster_id,
            "controller_id": described.controller_id,
            # A KRaft broker's DescribeCluster names a random live broker as
            # the controller (KIP-919: clients cannot reach the controllers),
            # so the active controller is the quorum's leader where offered.
            "active_controller_id": quorum["leader_id"]
            if quorum and quorum["leader_id"] >= 0
            else described.controller_id,
            "brokers": [
                {"node_id": n, "host": h, "port": p, "rack": r} for n, h, p, r in described.brokers
            ],
            "quorum": quorum,
        }

    async def quorum(self) -> dict | None:
        """The KRaft quorum as DescribeQuorum tells it; None where the
        cluster does not offer it (ZooKeeper-era Kafka, some other brokers)."""
        try:
            await self.cluster.version_for(None, api_keys.BY_NAME["DescribeQuorum"].key)
        except errors.UnsupportedVersionException:
            return None
        response = await self.cluster.send(
            None,
            DescribeQuorumRequest(
                topics=[
                    DescribeQuorumRequest.TopicData(
                        topic_name=_METADATA_TOPIC,
                        partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)],
                    )
                ]
            ),
        )
        if response.error_code or not response.topics:
            return None
        quorum = response.topics[0].partitions[0]
        if quorum.error_code:
            return None

        def replicas(states):
            return [
                {
                    "replica_id": r.replica_id,
                    "log_end_offset": r.log_end_offset,
                    "lag": max(quorum.high_watermark - r.log_end_offset, 0),
                    "last_fetch_timestamp": r.last_fetch_timestamp,
                    "last_caught_up_timestamp": r.last_caught_up_timestamp,
                }
                for r in states
            ]

        return {
            "leader_id": quorum.leader_id,
            "leader_epoch": quorum.leader_epoch,
            "high_watermark": quorum.high_watermark,
            "voters": replicas(quorum.current_voters),
            "observers": replicas(quorum.observers),
        }

    # ---- topics ----------------------------------------------------------------------

    async def _sizes(self) -> dict[tuple[str, int], dict[int, int]]:
        """(topic, partition) -> {broker: bytes on disk}, from DescribeLogDirs
        on every broker (a broker that does not answer is left out)."""
        sizes: dict[tuple[str, int], dict[int, int]] = {}
        nodes = await self._brokers()
        answers = await asyncio.gather(
            *(self.cluster.send(n, DescribeLogDirsRequest(topics=None)) for n in nodes),
            return_exceptions=True,
        )
        for node, answer in zip(nodes, answers):
            if isinstance(answer, BaseException):
                continue
            for result in answer.results:
                for topic in result.topics:
                    for p in topic.partitions:
                        if not p.is_future_key:
                            sizes.setdefault((topic.name, p.partition_index), {})[node] = (
                                p.partition_size
                            )
        return sizes

    async def _offsets(
        self, partitions: list[tuple[str, int]], spec: int
    ) -> dict[tuple[str, int], int]:
        if not partitions:
            return {}
        listed = await self.admin.list_offsets({tp: spec for tp in partitions})
        return {tp: o.offset for tp, o in listed.items()}

    async def topics(self) -> list[dict]:
        described = await self.admin.describe_topics(None, include_internal=True)
        partitions = [(t.name, p) for t in described for p in t.partitions]
        sizes, starts, ends = await asyncio.gather(
            self._sizes(), self._offsets(partitions, EARLIEST), self._offsets(partitions, LATEST)
        )
        out = []
        for t in described:
            keys = [(t.name, p) for p in t.partitions]
            out.append(
                {
                    "name": t.name,
                    "internal": t.is_internal,
                    "partitions": t.partition_count,
                    "replication_factor": max(
                        (len(p.replicas) for p in t.partitions.values()), default=0
                    ),
                    "under_replicated": sum(
                        1 for p in t.partitions.values() if len(p.isr) < len(p.replicas)
                    ),
                    "records": sum(ends.get(k, 0) - starts.get(k, 0) for k in keys),
                    "end_offsets": sum(ends.get(k, 0) for k in keys),
                    "size": sum(max(sizes.get(k, {0: 0}).values()) for k in keys),
                }
            )
        return out

    async def topic(self, name: str) -> dict:
        try:
            (t,) = await self.admin.describe_topics([name], include_internal=True)
        except errors.UnknownTopicOrPartitionException:
            raise QueryError(f"topic {name}: UnknownTopicOrPartitionException", 404) from None
        keys = [(name, p) for p in sorted(t.partitions)]
        sizes, starts, ends, configs = await asyncio.gather(
            self._sizes(),
            self._offsets(keys, EARLIEST),
            self._offsets(keys, LATEST),
            self.admin.describe_configs(CONFIG_RESOURCE_TOPIC, [name]),
        )
        return {
            "name": name,
            "topic_id": str(t.topic_id),
            "internal": t.is_internal,
            "partitions": [
                {
                    "partition": p.partition,
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replicas": p.replicas,
                    "isr": p.isr,
                    "offline_replicas": p.offline_replicas,
                    "earliest_offset": starts.get((name, p.partition)),
                    "latest_offset": ends.get((name, p.partition)),
                    "size": sizes.get((name, p.partition), {}).get(p.leader),
                    "replica_sizes": {
                        str(n): s for n, s in sizes.get((name, p.partition), {}).items()
                    },
                }
                for p in (t.partitions[i] for i in sorted(t.partitions))
            ],
            "configs": [
                {
                    "name": c.name,
                    "value": None if c.is_sensitive else c.value,
                    "source": _CONFIG_SOURCES.get(c.source, str(c.source)),
                    "read_only": c.read_only,
                    "sensitive": c.is_sensitive,
                }
                for c in configs.get(name, [])
            ],
        }

    async def end_offsets(self) -> dict:
        """{topic: sum of its partitions' log end offsets} for every
        non-internal topic: the browser polls it and plots the deltas."""
        described = await self.admin.describe_topics(None)
        ends = await self._offsets([(t.name, p) for t in described for p in t.partitions], LATEST)
        totals: dict[str, int] = {t.name: 0 for t in described}
        for (topic, _), offset in ends.items():
            totals[topic] += max(offset, 0)
        return totals

    # ---- consumer groups -------------------------------------------------------------

    async def groups(self) -> list[dict]:
        """ListGroups asks one broker for the groups it coordinates, so every
        broker is asked (as Kafka's admin client does)."""
        nodes = await self._brokers()
        answers = await asyncio.gather(
            *(self.cluster.send(n, ListGroupsRequest(states_filter=[])) for n in nodes),
            return_exceptions=True,
        )
        found = {}
        for node, answer in zip(nodes, answers):
            if isinstance(answer, BaseException) or answer.error_code:
                continue
            for g in answer.groups:
                found[g.group_id] = {
                    "group_id": g.group_id,
                    "protocol_type": g.protocol_type,
                    "state": g.group_state or None,
                    "coordinator": node,
                }
        return [found[g] for g in sorted(found)]

    async def _coordinator(self, group: str) -> int:
        version = await self.cluster.version_for(
            None, api_keys.BY_NAME["FindCoordinator"].key, _FIND_COORDINATOR_MAX
        )
        for attempt in range(20):
            response = await self.cluster.send(
                None,
                FindCoordinatorRequest(key=group, key_type=_GROUP_COORDINATOR_KEY),
                version=version,
            )
            if response.error_code != errors.CoordinatorNotAvailableException.code:
                break
            await self.cluster.backoff(attempt)
        _check(response.error_code, f"finding the coordinator of group {group}")
        if response.node_id not in self.cluster.brokers:
            await self.cluster.refresh_metadata([])
        return response.node_id

    async def group(self, group_id: str) -> dict:
        node = await self._coordinator(group_id)
        described = (
            await self.cluster.send(
                node, DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False)
            )
        ).groups[0]
        _check(described.error_code, f"describing group {group_id}")
        if described.group_state == "Dead":
            raise QueryError(f"consumer group {group_id} does not exist", 404)
        version = await self.cluster.version_for(
            node, api_keys.BY_NAME["OffsetFetch"].key, _OFFSET_FETCH_MAX
        )
        fetched = await self.cluster.send(
            node,
            OffsetFetchRequest(group_id=group_id, topics=None, require_stable=False),
            version=version,
        )
        _check(fetched.error_code, f"fetching the offsets of group {group_id}")
        committed = {
            (t.name, p.partition_index): p.committed_offset
            for t in fetched.topics
            for p in t.partitions
            if p.committed_offset >= 0
        }
        owners, members = {}, []
        for m in described.members:
            assigned = (
                assigned_partitions(m.member_assignment)
                if described.protocol_type == "consumer"
                else []
            )
            for tp in assigned:
                owners[tp] = m.member_id
            members.append(
                {
                    "member_id": m.member_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "group_instance_id": m.group_instance_id,
                    "assignment": [{"topic": t, "partition": p} for t, p in sorted(assigned)],
                }
            )
        partitions = sorted(set(committed) | set(owners))
        ends = await self._offsets(partitions, LATEST)
        offsets = []
        for tp in partitions:
            current, end = committed.get(tp), ends.get(tp)
            offsets.append(
                {
                    "topic": tp[0],
                    "partition": tp[1],
                    "committed_offset": current,
                    "log_end_offset": end,
                    "member_id": owners.get(tp),
                    "lag": end - current if current is not None and end is not None else None,
                }
            )
        return {
            "group_id": group_id,
            "state": described.group_state,
            "protocol_type": described.protocol_type,
            "protocol": described.protocol_data,
            "coordinator": node,
            "members": members,
            "offsets": offsets,
            "total_lag": sum(o["lag"] or 0 for o in offsets),
        }

    # ---- messages --------------------------------------------------------------------

    async def messages(
        self,
        topic: str,
        partition: int,
        offset: int | None = None,
        timestamp: int | None = None,
        limit: int = 50,
    ) -> dict:
        """Up to ``limit`` records of one partition from ``offset``, or from
        the first record at or after ``timestamp`` (ms), or, with neither,
        the last ``limit`` records."""
        if not 1 <= limit <= MAX_BROWSE:
            raise QueryError(f"limit must be 1..{MAX_BROWSE}")
        key = (topic, partition)
        try:
            partitions = await self.cluster.partitions_for(topic)
        except errors.UnknownTopicOrPartitionException:
            raise QueryError(f"topic {topic}: UnknownTopicOrPartitionException", 404) from None
        if partition not in partitions:
            raise QueryError(f"{topic} has no partition {partition}", 404)
        start_offset = (await self._offsets([key], EARLIEST))[key]
        end_offset = (await self._offsets([key], LATEST))[key]
        if timestamp is not None:
            found = (await self._offsets([key], timestamp))[key]
            position = end_offset if found < 0 else found
        elif offset is not None:
            position = offset
        else:
            position = max(end_offset - limit, start_offset)
        position = max(position, start_offset)
        records: list[dict[str, object]] = []
        while position < end_offset and len(records) < limit:
            part = await self.fetcher.fetch_raw(topic, partition, position)
            for r in decode_records(part):
                if r.offset >= position and len(records) < limit:
                    records.append(
                        {
                            "offset": r.offset,
                            "timestamp": r.timestamp,
                            "timestamp_type": r.timestamp_type,
                            "key": render_bytes(r.key),
                            "value": render_bytes(r.value),
                            "headers": [{"key": k, "value": render_bytes(v)} for k, v in r.headers],
                        }
                    )
            if part.next_offset <= position:
                break  # nothing readable below the end (an aborted tail, say)
            position = part.next_offset
        return {
            "topic": topic,
            "partition": partition,
            "earliest_offset": start_offset,
            "latest_offset": end_offset,
            "records": records,
        }
