"""ReplicationControlManager: topics, partitions, replicas, leaders and ISRs.

Operations (CreateTopics, DeleteTopics, CreatePartitions, auto-creation)
read the current state and return a ControllerResult: per-topic results in
the request's response type, and the records that make the change
(TopicRecord + PartitionRecords + ConfigRecords, RemoveTopicRecord,
PartitionRecords for new partitions, PartitionChangeRecords for elections,
reassignments and a leader's ISR changes). Validation follows Kafka's
controller (ReplicationControlManager.createTopics and friends): the first
failing rule gives the topic's (or partition's) error code and message, the
others of the request go on.

A new partition's ISR is its replicas on unfenced brokers and its leader the
first of them; leader epoch and partition epoch start at 0.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from kfast.config import ConfigException, LogConfig
from kfast.controller.cluster_control import ClusterControlManager
from kfast.controller.controller_result import (
    MAX_RECORDS_PER_USER_OP,
    ControllerResult,
    check_records_bound,
)
from kfast.controller.metadata.image import PartitionRegistration, TopicImage
from kfast.controller.metadata.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kfast.controller.placement import place_replicas
from kfast.controller.topics import unify_collision_chars, validate_topic_name
from kfast.protocol import errors
from kfast.protocol.constants import (
    CONFIG_RESOURCE_TOPIC,
    DIRECTORY_MIGRATING,
    DIRECTORY_UNASSIGNED,
    NO_LEADER,
    ZERO_UUID,
)
from kfast.storage.manager import CLUSTER_METADATA_TOPIC_NAME

logger = logging.getLogger(__name__)

# PartitionChangeRecord.leader: -2 means "leader unchanged".
NO_LEADER_CHANGE = -2
# What the topic operations answer: per (topic, partition), an error or None.
PartitionErrors = dict[tuple[str, int], errors.KafkaError | None]
# Places replicas: (live brokers, partition count, replication factor, racks,
# start_partition=...) -> replica lists (kfast.controller.placement).
Placement = Callable[..., list[list[int]]]
# ElectLeaders election types (Kafka's ElectionType).
ELECTION_PREFERRED, ELECTION_UNCLEAN = 0, 1
# Kafka's LeaderRecoveryState (KIP-704). kfast's elections never leave a
# partition RECOVERING, so every registration is RECOVERED.
LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING = 0, 1


@dataclass
class TopicControlInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionRegistration] = field(default_factory=dict)

    def image(self) -> TopicImage:
        return TopicImage(self.name, self.topic_id, dict(self.partitions))


@dataclass
class TopicSpec:
    """What one topic creation asks for, after defaults are resolved."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, list[int]] | None = None
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass
class CreatedTopic:
    name: str
    error: errors.KafkaError | None
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1


class BrokerState(NamedTuple):
    """A member of a proposed ISR (AlterPartition v3's BrokerState, KIP-903):
    ``broker_epoch`` -1 skips the check against its registration."""

    broker_id: int
    broker_epoch: int = -1


class AlterPartitionData(NamedTuple):
    """One partition of an AlterPartition request, as its leader proposes it."""

    partition_index: int
    leader_epoch: int
    new_isr: Sequence[BrokerState]
    leader_recovery_state: int
    partition_epoch: int


class AlterPartitionTopic(NamedTuple):
    """One topic of an AlterPartition request: by ``topic_id`` from version
    2, by ``topic_name`` before."""

    topic_id: uuid.UUID | None
    topic_name: str | None
    partitions: Sequence[AlterPartitionData]


class AlterPartitionResult(NamedTuple):
    """``registration``: the partition after the change (unchanged if the
    ISR was already the proposed one); None when ``error`` is set."""

    partition_index: int
    error: errors.KafkaError | None
    registration: PartitionRegistration | None = None


class ReplicationControlManager:
    """``cluster``: the ClusterControlManager (live brokers and racks);
    ``defaults()``: (num.partitions, default.replication.factor)."""

    def __init__(
        self,
        cluster: ClusterControlManager,
        defaults: Callable[[], tuple[int, int]],
        placement: Placement = place_replicas,
        unclean_election_enabled: Callable[[str], bool] = lambda topic: False,
    ):
        self.cluster = cluster
        self.defaults = defaults
        self.placement = placement
        self.unclean_election_enabled = unclean_election_enabled
        self.topics: dict[uuid.UUID, TopicControlInfo] = {}
        self.topics_by_name: dict[str, uuid.UUID] = {}
        # unify_collision_chars(name) -> names that map to it
        self._collision_names: dict[str, set[str]] = {}
        # broker id -> {(topic id, partition)} it is a replica of, kept by
        # replay (Kafka's BrokersToIsrs has the same job): a broker's
        # fencing, unfencing and controlled shutdown visit its own
        # partitions, not every partition in the cluster.
        self._replica_partitions: dict[int, set[tuple[uuid.UUID, int]]] = {}

    # -- queries -----------------------------------------------------------------
    def topic(self, name: str) -> TopicControlInfo | None:
        topic_id = self.topics_by_name.get(name)
        return None if topic_id is None else self.topics[topic_id]

    # -- CreateTopics --------------------------------------------------------------
    def create_topics(
        self, specs: list[TopicSpec], new_topic_id: Callable[[], uuid.UUID] = uuid.uuid4
    ) -> ControllerResult[list[CreatedTopic]]:
        """Response: one CreatedTopic per spec, in order. Names repeated in
        one request fail with INVALID_REQUEST (all their occurrences). A
        request for more than MAX_RECORDS_PER_USER_OP partitions, or whose
        records would be more than that, fails as a whole (raises)."""
        self._validate_total_number_of_partitions(specs)
        seen: dict[str, int] = {}
        for spec in specs:
            seen[spec.name] = seen.get(spec.name, 0) + 1
        results: list[CreatedTopic] = []
        records: list[MetadataRecord] = []
        planned: set[str] = set()
        for spec in specs:
            if seen[spec.name] > 1:
                results.append(
                    CreatedTopic(spec.name, errors.InvalidRequestException("Duplicate topic name."))
                )
                continue
            try:
                created, topic_records = self._create_topic(spec, planned, new_topic_id)
            except errors.KafkaError as exc:
                results.append(CreatedTopic(spec.name, exc))
                continue
            planned.add(spec.name)
            results.append(created)
            records += topic_records
            check_records_bound(len(records))
        return ControllerResult(results, records)

    def _validate_total_number_of_partitions(self, specs: list[TopicSpec]) -> None:
        """Kafka's ReplicationControlManager.validateTotalNumberOfPartitions
        (KAFKA-17870), checked before anything else of the request."""
        default_partitions, _ = self.defaults()
        total = 0
        for spec in specs:
            if spec.assignments:
                total += len(spec.assignments)
            elif spec.num_partitions == -1:
                total += default_partitions
            elif spec.num_partitions > 0:
                total += spec.num_partitions
        if total > MAX_RECORDS_PER_USER_OP:
            raise errors.PolicyViolationException(
                "Excessively large number of partitions per request."
            )

    def _create_topic(
        self, spec: TopicSpec, planned: set[str], new_topic_id: Callable[[], uuid.UUID]
    ) -> tuple[CreatedTopic, list[MetadataRecord]]:
        name = spec.name
        validate_topic_name(name)
        if name == CLUSTER_METADATA_TOPIC_NAME:
            # Its directory is the metadata log's.
            raise errors.InvalidRequestException(
                f"Creation of internal topic {CLUSTER_METADATA_TOPIC_NAME} is prohibited."
            )
        if name in self.topics_by_name or name in planned:
            raise errors.TopicExistsException(f"Topic '{name}' already exists.")
        unified = unify_collision_chars(name)
        colliding = self._collision_names.get(unified, set()) | {
            p for p in planned if unify_collision_chars(p) == unified
        }
        if colliding:
            raise errors.InvalidTopicException(
                f"Topic '{name}' collides with existing topic: {sorted(colliding)[0]}"
            )
        default_partitions, default_rf = self.defaults()
        if spec.assignments:
            if spec.num_partitions != -1:
                raise errors.InvalidRequestException(
                    "A manual partition assignment was specified, but numPartitions was not "
                    "set to -1."
                )
            if spec.replication_factor != -1:
                raise errors.InvalidRequestException(
                    "A manual partition assignment was specified, but replicationFactor was "
                    "not set to -1."
                )
            indices = sorted(spec.assignments)
            if indices != list(range(len(indices))):
                raise errors.InvalidReplicaAssignmentException(
                    "partitions should be a consecutive 0-based integer sequence"
                )
            assignment = [self._check_assignment(list(spec.assignments[i])) for i in indices]
            sizes = {len(replicas) for replicas in assignment}
            if len(sizes) > 1:
                raise errors.InvalidReplicaAssignmentException(
                    "All partitions in the manual partition assignment must have the same number "
                    "of replicas."
                )
        else:
            partitions = default_partitions if spec.num_partitions == -1 else spec.num_partitions
            rf = default_rf if spec.replication_factor == -1 else spec.replication_factor
            if partitions <= 0:
                raise errors.InvalidPartitionsException(
                    "Number of partitions was set to an invalid non-positive value."
                )
            if rf <= 0:
                raise errors.InvalidReplicationFactorException(
                    "Replication factor must be larger than 0, or -1 to use the default value."
                )
            assignment = self.placement(
                self.cluster.active_brokers(), partitions, rf, self.cluster.racks()
            )
        configs: dict[str, str] = {}
        for key, value in (spec.configs or {}).items():
            if value is None:
                raise errors.InvalidRequestException(
                    f"Null value not supported for topic configs: {key}"
                )
            configs[key] = value
        try:
            LogConfig.validate(configs)
        except ConfigException as exc:
            raise errors.InvalidConfigurationException(str(exc)) from None
        topic_id = new_topic_id()
        records: list[MetadataRecord] = [
            ConfigRecord(
                resource_type=CONFIG_RESOURCE_TOPIC, resource_name=name, name=key, value=value
            )
            for key, value in configs.items()
        ]
        records.append(TopicRecord(name=name, topic_id=topic_id))
        for index, replicas in enumerate(assignment):
            records.append(self._new_partition_record(topic_id, index, replicas))
        return CreatedTopic(name, None, topic_id, len(assignment), len(assignment[0])), records

    def _check_assignment(self, replicas: list[int]) -> list[int]:
        if not replicas:
            raise errors.InvalidReplicaAssignmentException(
                "The manual partition assignment includes an empty replica list."
            )
        if len(set(replicas)) != len(replicas):
            raise errors.InvalidReplicaAssignmentException(
                f"The manual partition assignment includes the broker "
                f"{next(r for r in replicas if replicas.count(r) > 1)} more than once."
            )
        for broker in replicas:
            if broker not in self.cluster.brokers:
                raise errors.InvalidReplicaAssignmentException(
                    f"The manual partition assignment includes broker {broker}, but no such "
                    f"broker is registered."
                )
        return replicas

    def _new_partition_record(
        self, topic_id: uuid.UUID, index: int, replicas: list[int]
    ) -> PartitionRecord:
        isr = [r for r in replicas if self.cluster.is_active(r)]
        if not isr:
            raise errors.InvalidReplicationFactorException(
                "All brokers specified in the partition assignment are currently fenced."
            )
        return PartitionRecord(
            partition_id=index,
            topic_id=topic_id,
            replicas=list(replicas),
            isr=isr,
            leader=isr[0],
            leader_epoch=0,
            partition_epoch=0,
            directories=[self.cluster.default_dir(r) for r in replicas],
        )

    # -- DeleteTopics --------------------------------------------------------------
    def delete_topics(
        self, names: list[str | None], topic_ids: list[uuid.UUID]
    ) -> ControllerResult[list[tuple[str | None, uuid.UUID, errors.KafkaError | None]]]:
        """``names[i]`` or ``topic_ids[i]`` (the other None / ZERO_UUID)
        names the i-th topic. Response: (name, topic_id, error) per entry."""
        results: list[tuple[str | None, uuid.UUID, errors.KafkaError | None]] = []
        records: list[MetadataRecord] = []
        name_counts: dict[str, int] = {}
        id_counts: dict[uuid.UUID, int] = {}
        for name, topic_id in zip(names, topic_ids):
            if name is not None:
                name_counts[name] = name_counts.get(name, 0) + 1
            if topic_id != ZERO_UUID:
                id_counts[topic_id] = id_counts.get(topic_id, 0) + 1
        removed: set[uuid.UUID] = set()
        for name, topic_id in zip(names, topic_ids):
            error: errors.KafkaError | None = None
            if name is not None and topic_id != ZERO_UUID:
                error = errors.InvalidRequestException(
                    "You may not specify both topic name and topic id."
                )
            elif name is None and topic_id == ZERO_UUID:
                error = errors.InvalidRequestException("Neither topic name nor id were specified.")
            elif name is not None and name_counts[name] > 1:
                error = errors.InvalidRequestException("Duplicate topic name.")
            elif topic_id != ZERO_UUID and id_counts[topic_id] > 1:
                error = errors.InvalidRequestException("Duplicate topic id.")
            elif name is not None:
                found = self.topics_by_name.get(name)
                if found is None:
                    error = errors.UnknownTopicOrPartitionException(
                        "This server does not host this topic-partition."
                    )
                else:
                    topic_id = found
            else:
                topic = self.topics.get(topic_id)
                if topic is None:
                    error = errors.UnknownTopicIdException(
                        "This server does not host this topic ID."
                    )
                else:
                    name = topic.name
            if error is None and topic_id not in removed:
                removed.add(topic_id)
                records.append(RemoveTopicRecord(topic_id=topic_id))
            results.append((name, topic_id, error))
        return ControllerResult(results, records)

    # -- CreatePartitions ----------------------------------------------------------
    def create_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None
    ) -> ControllerResult[None]:
        """Response: None on success (raises the topic's KafkaError)."""
        topic = self.topic(name)
        if topic is None:
            raise errors.UnknownTopicOrPartitionException(
                "This server does not host this topic-partition."
            )
        current = len(topic.partitions)
        if count < current:
            raise errors.InvalidPartitionsException(
                f"The topic {name} currently has {current} partition(s); {count} would not be an "
                f"increase."
            )
        if count == current:
            raise errors.InvalidPartitionsException(f"Topic already has {current} partition(s).")
        additional = count - current
        # Before placing them: one PartitionRecord per new partition.
        check_records_bound(additional)
        rf = len(topic.partitions[0].replicas) if topic.partitions else 1
        if assignments:
            if len(assignments) != additional:
                raise errors.InvalidReplicaAssignmentException(
                    f"Attempted to add {additional} additional partition(s), but only "
                    f"{len(assignments)} assignment(s) were specified."
                )
            placed = []
            for assigned in assignments:
                replicas = self._check_assignment(list(assigned))
                if len(replicas) != rf:
                    raise errors.InvalidReplicaAssignmentException(
                        f"The manual partition assignment includes a partition with "
                        f"{len(replicas)} replica(s), but this is not consistent with previous "
                        f"partitions, which have {rf} replica(s)."
                    )
                placed.append(replicas)
        else:
            placed = self.placement(
                self.cluster.active_brokers(),
                additional,
                rf,
                self.cluster.racks(),
                start_partition=current,
            )
        records: list[MetadataRecord] = [
            self._new_partition_record(topic.topic_id, current + i, replicas)
            for i, replicas in enumerate(placed)
        ]
        return ControllerResult(None, records)

    # -- ElectLeaders --------------------------------------------------------------
    def elect_leaders(
        self, election_type: int, partitions: Iterable[tuple[str, int]] | None
    ) -> ControllerResult[PartitionErrors]:
        """Preferred (0) or unclean (1) election for ``partitions``
        ((topic, index) pairs; None = every partition). Response:
        {(topic, index): KafkaError | None}."""
        if partitions is None:
            partitions = [(t.name, i) for t in self.topics.values() for i in sorted(t.partitions)]
        results: PartitionErrors = {}
        records: list[MetadataRecord] = []
        for name, index in partitions:
            topic = self.topic(name)
            if topic is None or index not in topic.partitions:
                results[name, index] = errors.UnknownTopicOrPartitionException(
                    f"The partition {name}-{index} does not exist."
                )
                continue
            registration = topic.partitions[index]
            alive = self.cluster.is_active
            change = None
            if election_type == ELECTION_PREFERRED:
                preferred = registration.replicas[0]
                if registration.leader == preferred:
                    results[name, index] = errors.ElectionNotNeededException(
                        "Leader election not needed for topic partition."
                    )
                elif preferred in registration.isr and alive(preferred):
                    change = PartitionChangeRecord(
                        partition_id=index, topic_id=topic.topic_id, leader=preferred
                    )
                else:
                    results[name, index] = errors.PreferredLeaderNotAvailableException(
                        f"Failed to elect leader for partition {name}-{index} under strategy "
                        f"PreferredReplicaPartitionLeaderElectionStrategy"
                    )
            elif election_type == ELECTION_UNCLEAN:
                if registration.leader != NO_LEADER and alive(registration.leader):
                    results[name, index] = errors.ElectionNotNeededException(
                        "Leader election not needed for topic partition."
                    )
                else:
                    in_sync = [r for r in registration.isr if alive(r)]
                    candidates = in_sync or [r for r in registration.replicas if alive(r)]
                    if not candidates:
                        results[name, index] = errors.EligibleLeadersNotAvailableException(
                            f"Failed to elect leader for partition {name}-{index} under strategy "
                            f"UncleanLeaderElectionStrategy"
                        )
                    else:
                        leader = candidates[0]
                        change = PartitionChangeRecord(
                            partition_id=index,
                            topic_id=topic.topic_id,
                            leader=leader,
                            isr=None if in_sync else [leader],
                        )
            else:
                results[name, index] = errors.InvalidRequestException(
                    f"Unknown election type {election_type}"
                )
            if change is not None:
                records.append(change)
                results[name, index] = None
        return ControllerResult(results, records)

    # -- partition reassignments -----------------------------------------------------
    def alter_partition_reassignments(
        self,
        requests: Iterable[tuple[str, int, Sequence[int] | None]],
        allow_replication_factor_change: bool = True,
    ) -> ControllerResult[PartitionErrors]:
        """requests: (topic, index, target replicas or None to cancel).
        Response: {(topic, index): KafkaError | None}.

        A target that only drops replicas which are in sync completes at
        once; one that adds replicas stays pending (replicas = target + the
        ones being removed, with adding/removing recorded) until the new
        replicas join the ISR -- follower replication finishes it."""
        results: PartitionErrors = {}
        records: list[MetadataRecord] = []
        for name, index, target in requests:
            try:
                topic = self.topic(name)
                if topic is None or index not in topic.partitions:
                    raise errors.UnknownTopicOrPartitionException(
                        f"Unable to find partition {name}-{index}."
                    )
                registration = topic.partitions[index]
                change: PartitionChangeRecord | None
                if target is None:
                    change = self._cancel_reassignment(topic, index, registration)
                else:
                    change = self._reassign(
                        topic, index, registration, list(target), allow_replication_factor_change
                    )
                if change is not None:
                    records.append(change)
                results[name, index] = None
            except errors.KafkaError as exc:
                results[name, index] = exc
        return ControllerResult(results, records)

    def _reassign(
        self,
        topic: TopicControlInfo,
        index: int,
        registration: PartitionRegistration,
        target: list[int],
        allow_replication_factor_change: bool,
    ) -> PartitionChangeRecord | None:
        self._check_assignment(target)
        original = [r for r in registration.replicas if r not in registration.adding_replicas]
        if not allow_replication_factor_change and len(target) != len(original):
            raise errors.InvalidReplicationFactorException(
                f"The replication factor is changed from {len(original)} to {len(target)}"
            )
        adding = [r for r in target if r not in original]
        removing = [r for r in original if r not in target]
        in_progress = bool(registration.adding_replicas or registration.removing_replicas)
        if target == list(registration.replicas) and not in_progress:
            return None  # already there
        change = PartitionChangeRecord(partition_id=index, topic_id=topic.topic_id)
        isr = [r for r in registration.isr if r in target]
        if not adding and isr:
            # Complete now: every target replica is a current one.
            change.replicas = target
            change.removing_replicas, change.adding_replicas = [], []
            if tuple(isr) != registration.isr:
                change.isr = isr
            if registration.leader not in target:
                change.leader = self._elect(topic.name, registration, isr)
            return change
        change.replicas = target + removing
        change.adding_replicas = adding
        change.removing_replicas = removing
        return change

    def _cancel_reassignment(
        self, topic: TopicControlInfo, index: int, registration: PartitionRegistration
    ) -> PartitionChangeRecord:
        if not registration.adding_replicas and not registration.removing_replicas:
            raise errors.NoReassignmentInProgressException(
                f"Unable to find an ongoing reassignment for {topic.name}-{index}."
            )
        original = [r for r in registration.replicas if r not in registration.adding_replicas]
        isr = [r for r in registration.isr if r in original] or list(registration.isr)
        change = PartitionChangeRecord(
            partition_id=index,
            topic_id=topic.topic_id,
            replicas=original,
            adding_replicas=[],
            removing_replicas=[],
        )
        if tuple(isr) != registration.isr:
            change.isr = isr
        if registration.leader not in original:
            change.leader = self._elect(topic.name, registration, isr)
        return change

    # -- AlterPartition ------------------------------------------------------------
    def alter_partition(
        self,
        broker_id: int,
        broker_epoch: int,
        topics: Sequence[AlterPartitionTopic],
        version: int = 3,
    ) -> ControllerResult[list[list[AlterPartitionResult]]]:
        """A partition leader's ISR shrink or expansion (Kafka's
        ReplicationControlManager.alterPartition); ``version`` is the
        request's, which decides how topics are named and which error codes
        older leaders understand. Raises StaleBrokerEpochException (the whole
        request) unless ``broker_epoch`` is the requester's registered epoch.

        Response: per entry of ``topics``, in order, a list of
        AlterPartitionResult in its partitions' order. An ISR that lets every
        replica being added join completes the reassignment in the same
        change; if that moves the leadership away from the requester it gets
        NEW_LEADER_ELECTED (FENCED_LEADER_EPOCH before version 2) although
        the change is written."""
        try:
            registered_epoch = self.cluster.broker_epoch(broker_id)
        except errors.BrokerIdNotRegisteredException:
            raise errors.StaleBrokerEpochException(
                f"No broker registration found for broker id {broker_id}"
            ) from None
        if registered_epoch != broker_epoch:
            raise errors.StaleBrokerEpochException(
                f"Expected broker epoch {registered_epoch}, but got broker epoch {broker_epoch}"
            )
        results: list[list[AlterPartitionResult]] = []
        records: list[MetadataRecord] = []
        for entry in topics:
            if version > 1:
                topic_id = entry.topic_id
            else:
                name = entry.topic_name
                topic_id = None if name is None else self.topics_by_name.get(name)
            topic = None if topic_id is None else self.topics.get(topic_id)
            if topic is None:
                error: errors.KafkaError | None = (
                    errors.UnknownTopicIdException()
                    if version > 1
                    else errors.UnknownTopicOrPartitionException()
                )
                results.append(
                    [AlterPartitionResult(p.partition_index, error) for p in entry.partitions]
                )
                continue
            partition_results: list[AlterPartitionResult] = []
            for data in entry.partitions:
                index = data.partition_index
                registration = topic.partitions.get(index)
                error = (
                    errors.UnknownTopicOrPartitionException(
                        f"Unknown partition {topic.name}-{index}."
                    )
                    if registration is None
                    else self._validate_alter_partition(
                        broker_id, topic, registration, data, version
                    )
                )
                if registration is None or error is not None:
                    partition_results.append(AlterPartitionResult(index, error))
                    continue
                change = self._isr_change(
                    topic, index, registration, [member.broker_id for member in data.new_isr]
                )
                if change is not None:
                    records.append(change)
                    registration = apply_partition_change(registration, change)
                    if registration.leader != broker_id:
                        # Only a completed reassignment moves the leadership here;
                        # the old leader must learn the new one from metadata.
                        logger.info(
                            "AlterPartition from broker %d completed the reassignment "
                            "of %s-%d and moved its leadership to %d",
                            broker_id,
                            topic.name,
                            index,
                            registration.leader,
                        )
                        error = (
                            errors.NewLeaderElectedException()
                            if version > 1
                            else errors.FencedLeaderEpochException()
                        )
                        partition_results.append(AlterPartitionResult(index, error))
                        continue
                partition_results.append(AlterPartitionResult(index, None, registration))
            results.append(partition_results)
        return ControllerResult(results, records)

    def _validate_alter_partition(
        self,
        broker_id: int,
        topic: TopicControlInfo,
        registration: PartitionRegistration,
        data: AlterPartitionData,
        version: int,
    ) -> errors.KafkaError | None:
        """Kafka's validateAlterPartitionData (of an existing partition): the
        first rule broken, or None."""
        name = f"{topic.name}-{data.partition_index}"
        # A leader that knows a newer epoch than this controller has heard
        # from a newer controller: NOT_CONTROLLER sends it looking for it.
        if (
            data.leader_epoch > registration.leader_epoch
            or data.partition_epoch > registration.partition_epoch
        ):
            return errors.NotControllerException(
                f"The leader of {name} has seen leader epoch {data.leader_epoch} and partition "
                f"epoch {data.partition_epoch}, newer than this controller's "
                f"{registration.leader_epoch} and {registration.partition_epoch}."
            )
        if data.leader_epoch < registration.leader_epoch:
            return errors.FencedLeaderEpochException(
                f"The leader epoch of {name} is {registration.leader_epoch}, not "
                f"{data.leader_epoch}."
            )
        if broker_id != registration.leader:
            return errors.InvalidRequestException(
                f"Broker {broker_id} is not the leader of {name} ({registration.leader} is)."
            )
        if data.partition_epoch < registration.partition_epoch:
            # The change this request was based on has been superseded.
            return errors.InvalidUpdateVersionException(
                f"The partition epoch of {name} is {registration.partition_epoch}, not "
                f"{data.partition_epoch}."
            )
        new_isr = [member.broker_id for member in data.new_isr]
        if not _valid_isr(registration.replicas, new_isr):
            return errors.InvalidRequestException(
                f"Invalid ISR {new_isr} for {name}: replicas are {list(registration.replicas)}."
            )
        if registration.leader not in new_isr:
            return errors.InvalidRequestException(
                f"The ISR {new_isr} of {name} does not include its leader {registration.leader}."
            )
        state = data.leader_recovery_state
        if state not in (LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING):
            # Kafka fails the whole request (UNKNOWN_SERVER_ERROR) on a value
            # LeaderRecoveryState.of rejects; kfast refuses the partition.
            return errors.InvalidRequestException(f"Unknown leader recovery state {state}.")
        if state == LEADER_RECOVERY_RECOVERING and len(new_isr) > 1:
            return errors.InvalidRequestException(
                f"The ISR {new_isr} of {name} has more than one replica while its leader is "
                f"recovering from an unclean leader election."
            )
        if state == LEADER_RECOVERY_RECOVERING:
            # Every registration here is RECOVERED, and that is final.
            return errors.InvalidRequestException(
                f"The leader recovery state of {name} cannot change from RECOVERED to RECOVERING."
            )
        ineligible = self._ineligible_replicas(data.new_isr)
        if ineligible:
            message = f"Ineligible replicas {ineligible} in the new ISR {new_isr} of {name}."
            # INELIGIBLE_REPLICA is version 2's (KIP-841).
            return (
                errors.IneligibleReplicaException(message)
                if version > 1
                else errors.OperationNotAttemptedException(message)
            )
        return None

    def _ineligible_replicas(self, new_isr: Sequence[BrokerState]) -> list[str]:
        """Why members of a proposed ISR may not be in it: a replica joins
        only on a broker in service, of the registration the leader saw."""
        reasons = []
        for member in new_isr:
            registration = self.cluster.brokers.get(member.broker_id)
            if registration is None:
                reasons.append(f"{member.broker_id} (not registered)")
            elif registration.in_controlled_shutdown:
                reasons.append(f"{member.broker_id} (shutting down)")
            elif registration.fenced:
                reasons.append(f"{member.broker_id} (fenced)")
            elif member.broker_epoch != -1 and member.broker_epoch != registration.epoch:
                reasons.append(
                    f"{member.broker_id} (broker epoch {member.broker_epoch}, "
                    f"registered {registration.epoch})"
                )
        return reasons

    def _isr_change(
        self,
        topic: TopicControlInfo,
        index: int,
        registration: PartitionRegistration,
        new_isr: list[int],
    ) -> PartitionChangeRecord | None:
        """What Kafka's PartitionChangeBuilder makes of a validated target
        ISR: the record (only the fields that change), or None if nothing
        does. The leader is in the new ISR and in service, so it stays,
        unless a completed reassignment removes it."""
        change = PartitionChangeRecord(partition_id=index, topic_id=topic.topic_id)
        isr = new_isr
        removing = registration.removing_replicas
        if registration.adding_replicas or removing:
            target = [r for r in registration.replicas if r not in removing]
            completed_isr = [r for r in new_isr if r not in removing]
            if target and completed_isr and all(r in completed_isr for r in target):
                # Every target replica is in sync: PartitionReassignmentReplicas
                # .maybeCompleteReassignment.
                isr = completed_isr
                if target != list(registration.replicas):
                    change.replicas = target
                if registration.adding_replicas:
                    change.adding_replicas = []
                if removing:
                    change.removing_replicas = []
                if registration.leader not in isr:
                    # The ISR holds only brokers in service, so this election is clean.
                    change.leader = self._elect(
                        topic.name, replace(registration, replicas=tuple(target)), isr
                    )
                elif removing:
                    # A leader epoch bump fences the replicas that leave.
                    change.leader = registration.leader
        if tuple(isr) != registration.isr:
            change.isr = isr
        if (
            change.isr is None
            and change.leader == NO_LEADER_CHANGE
            and change.replicas is None
            and change.adding_replicas is None
            and change.removing_replicas is None
        ):
            return None
        return change

    # -- broker fencing ------------------------------------------------------------
    def _elect(
        self,
        topic_name: str,
        registration: PartitionRegistration,
        isr: Sequence[int],
        excluded: int | None = None,
        also_active: int | None = None,
    ) -> int:
        """OfflinePartitionLeaderElectionStrategy: the first replica (in
        assignment order) that is alive and in the ISR; with unclean leader
        election enabled, else the first alive replica."""

        def alive(broker: int) -> bool:
            return (
                broker != excluded
                and (broker == also_active or self.cluster.is_active(broker))
                and self._in_online_dir(registration, broker)
            )

        for replica in registration.replicas:
            if replica in isr and alive(replica):
                return replica
        if self.unclean_election_enabled(topic_name):
            for replica in registration.replicas:
                if alive(replica):
                    return replica
        return NO_LEADER

    def count_elections(self, records: Iterable[MetadataRecord]) -> tuple[int, int]:
        """(elections, unclean elections) among ``records`` this controller
        is about to commit: PartitionChangeRecords giving a partition a
        leader other than its current one. Unclean as Kafka's
        PartitionRegistration.electionWasClean: the new leader is not in the
        ISR before the change. Call before the records are replayed."""
        elections = unclean = 0
        for record in records:
            if not isinstance(record, PartitionChangeRecord) or record.leader < 0:
                continue
            topic = self.topics.get(record.topic_id)
            registration = topic.partitions.get(record.partition_id) if topic else None
            if registration is None or registration.leader == record.leader:
                continue
            elections += 1
            if record.leader not in registration.isr:
                unclean += 1
        return elections, unclean

    def imbalanced_partitions(self, limit: int) -> list[tuple[str, int]]:
        """Partitions not led by their preferred replica (the first in the
        assignment) although it is in sync and active: what a preferred
        election would move (Kafka's imbalancedPartitions), at most
        ``limit`` of them (maxElectionsPerImbalance)."""
        found: list[tuple[str, int]] = []
        for topic in self.topics.values():
            for index, registration in sorted(topic.partitions.items()):
                preferred = registration.replicas[0] if registration.replicas else NO_LEADER
                if (
                    registration.leader != preferred
                    and preferred in registration.isr
                    and self.cluster.is_active(preferred)
                ):
                    found.append((topic.name, index))
                    if len(found) >= limit:
                        return found
        return found

    def leaderships(self, broker_id: int) -> int:
        """How many partitions ``broker_id`` leads."""
        return sum(
            1
            for topic, _, registration in self._partitions_of(broker_id)
            if registration.leader == broker_id
        )

    def _partitions_of(
        self, broker_id: int
    ) -> list[tuple[TopicControlInfo, int, PartitionRegistration]]:
        """(topic, index, registration) of the partitions ``broker_id`` is a
        replica of, by topic name and index."""
        found = [
            (self.topics[topic_id], index)
            for topic_id, index in self._replica_partitions.get(broker_id, ())
        ]
        found.sort(key=lambda entry: (entry[0].name, entry[1]))
        return [(topic, index, topic.partitions[index]) for topic, index in found]

    def _index_replicas(
        self,
        topic_id: uuid.UUID,
        index: int,
        old: PartitionRegistration | None,
        new: PartitionRegistration | None,
    ) -> None:
        if old is not None and new is not None and old.replicas == new.replicas:
            return  # most changes: a leader or an ISR, not the replicas
        key = (topic_id, index)
        for broker_id in set(old.replicas if old else ()) - set(new.replicas if new else ()):
            replicas_of = self._replica_partitions[broker_id]
            replicas_of.discard(key)
            if not replicas_of:
                del self._replica_partitions[broker_id]
        for broker_id in new.replicas if new else ():
            self._replica_partitions.setdefault(broker_id, set()).add(key)

    def _in_online_dir(self, registration: PartitionRegistration, broker: int) -> bool:
        """Whether ``broker``'s replica is in a log dir it has online (KIP-858)."""
        directory = _directory_of(registration, broker)
        return directory is None or self.cluster.has_online_dir(broker, directory)

    def broker_fenced(
        self, broker_id: int, only_dirs: set[uuid.UUID] | None = None
    ) -> list[MetadataRecord]:
        """PartitionChangeRecords for a broker leaving service: it leaves
        every ISR (except as the last member: without eligible leader
        replicas the ISR never becomes empty) and its leaderships move to
        another in-sync replica, or to no leader. ``only_dirs``: only its
        replicas assigned to these log dirs (they went offline)."""
        records: list[MetadataRecord] = []
        for topic, index, registration in self._partitions_of(broker_id):
            if broker_id not in registration.isr and registration.leader != broker_id:
                continue
            if only_dirs is not None and _directory_of(registration, broker_id) not in only_dirs:
                continue
            isr = [r for r in registration.isr if r != broker_id] or list(registration.isr)
            leader = registration.leader
            if leader == broker_id or leader not in isr:
                leader = self._elect(topic.name, registration, isr, excluded=broker_id)
            unclean = leader != NO_LEADER and leader not in isr
            if unclean:
                isr = [leader]
            change = PartitionChangeRecord(partition_id=index, topic_id=topic.topic_id)
            if tuple(isr) != registration.isr:
                change.isr = isr
            if leader != registration.leader:
                change.leader = leader
            if change.isr is not None or change.leader != NO_LEADER_CHANGE:
                records.append(change)
        return records

    def broker_unfenced(self, broker_id: int) -> list[MetadataRecord]:
        """PartitionChangeRecords electing a returning broker where a
        partition it is a replica of has no leader: if it is in sync, or
        -- unclean.leader.election.enable for the topic -- if no in-sync
        replica is alive (its ISR becomes just the new leader, and what
        only the lost replicas had is gone, as Kafka documents)."""
        records: list[MetadataRecord] = []
        for topic, index, registration in self._partitions_of(broker_id):
            if registration.leader != NO_LEADER:
                continue
            if broker_id not in registration.isr and not self.unclean_election_enabled(topic.name):
                continue
            leader = self._elect(topic.name, registration, registration.isr, also_active=broker_id)
            if leader == NO_LEADER:
                continue
            change = PartitionChangeRecord(
                partition_id=index, topic_id=topic.topic_id, leader=leader
            )
            if leader not in registration.isr:
                change.isr = [leader]
            records.append(change)
        return records

    # -- log directories (KIP-858) ----------------------------------------------------
    def handle_directories_offline(
        self, broker_id: int, broker_epoch: int, offline: Sequence[uuid.UUID]
    ) -> list[MetadataRecord]:
        """Kafka's handleDirectoriesOffline: for each of ``offline`` the
        broker still had online, its replicas there leave their ISRs and
        their leaderships move (as if the broker were fenced for those
        partitions only), and the broker's registration keeps the other
        dirs. Call with the broker's registration current."""
        registration = self.cluster.brokers.get(broker_id)
        if registration is None or registration.epoch != broker_epoch:
            return []
        newly = {d for d in offline if d in registration.directories}
        if not newly:
            return []
        online = [d for d in registration.directories if d not in newly]
        records = self.broker_fenced(broker_id, only_dirs=newly)
        records.append(
            BrokerRegistrationChangeRecord(
                broker_id=broker_id,
                broker_epoch=broker_epoch,
                # Empty means "unchanged" (as Kafka): with no dir left the
                # broker halts anyway.
                log_dirs=online,
            )
        )
        logger.warning(
            "Directories %s in broker %d marked offline, remaining directories: %s",
            sorted(str(d) for d in newly),
            broker_id,
            [str(d) for d in online],
        )
        return records

    def assign_replicas_to_dirs(
        self,
        broker_id: int,
        broker_epoch: int,
        assignments: Mapping[uuid.UUID, Sequence[tuple[uuid.UUID, int]]],
    ) -> ControllerResult[dict[tuple[uuid.UUID, uuid.UUID, int], int]]:
        """AssignReplicasToDirs (Kafka's handleAssignReplicasToDirs):
        ``assignments``: directory id -> [(topic id, partition)]. Response:
        {(directory, topic id, partition): error code}; a PartitionChangeRecord
        with the new directories for each replica that moved."""
        registration = self.cluster.brokers.get(broker_id)
        if registration is None:
            raise errors.BrokerIdNotRegisteredException(f"Broker {broker_id} is not registered.")
        if registration.epoch != broker_epoch:
            raise errors.StaleBrokerEpochException(
                f"Expected broker epoch {registration.epoch}, but got broker epoch {broker_epoch}"
            )
        results: dict[tuple[uuid.UUID, uuid.UUID, int], int] = {}
        records: list[MetadataRecord] = []
        for directory, partitions in assignments.items():
            for topic_id, index in partitions:
                key = (directory, topic_id, index)
                if not registration.has_online_dir(directory):
                    results[key] = errors.LogDirNotFoundException.code
                    continue
                topic = self.topics.get(topic_id)
                if topic is None:
                    results[key] = errors.UnknownTopicIdException.code
                    continue
                current = topic.partitions.get(index)
                if current is None:
                    results[key] = errors.UnknownTopicOrPartitionException.code
                    continue
                if broker_id not in current.replicas:
                    results[key] = errors.NotLeaderOrFollowerException.code
                    continue
                results[key] = 0
                position = current.replicas.index(broker_id)
                directories = list(_directories(current))
                if directories[position] == directory:
                    continue
                directories[position] = directory
                records.append(
                    PartitionChangeRecord(
                        partition_id=index, topic_id=topic_id, directories=directories
                    )
                )
        return ControllerResult(results, records)

    # -- replay --------------------------------------------------------------------
    def replay(
        self, record: TopicRecord | PartitionRecord | PartitionChangeRecord | RemoveTopicRecord
    ) -> tuple[str, str]:
        """Apply one record; returns ("changed" | "deleted", topic name)."""
        if isinstance(record, TopicRecord):
            self.topics[record.topic_id] = TopicControlInfo(record.name, record.topic_id)
            self.topics_by_name[record.name] = record.topic_id
            self._collision_names.setdefault(unify_collision_chars(record.name), set()).add(
                record.name
            )
            return "changed", record.name
        if isinstance(record, PartitionRecord):
            topic = self.topics[record.topic_id]
            old = topic.partitions.get(record.partition_id)
            new = topic.partitions[record.partition_id] = PartitionRegistration(
                tuple(record.replicas),
                tuple(record.isr),
                record.leader,
                record.leader_epoch,
                record.partition_epoch,
                tuple(record.removing_replicas or ()),
                tuple(record.adding_replicas or ()),
                directories=tuple(record.directories or ()),
            )
            self._index_replicas(record.topic_id, record.partition_id, old, new)
            return "changed", topic.name
        if isinstance(record, PartitionChangeRecord):
            topic = self.topics[record.topic_id]
            old = topic.partitions[record.partition_id]
            new = topic.partitions[record.partition_id] = apply_partition_change(old, record)
            self._index_replicas(record.topic_id, record.partition_id, old, new)
            return "changed", topic.name
        if isinstance(record, RemoveTopicRecord):
            topic = self.topics.pop(record.topic_id)
            for index, registration in topic.partitions.items():
                self._index_replicas(record.topic_id, index, registration, None)
            del self.topics_by_name[topic.name]
            unified = unify_collision_chars(topic.name)
            names = self._collision_names.get(unified, set())
            names.discard(topic.name)
            if not names:
                self._collision_names.pop(unified, None)
            return "deleted", topic.name
        raise TypeError(f"not a replication record: {type(record).__name__}")


def apply_partition_change(
    current: PartitionRegistration, change: PartitionChangeRecord
) -> PartitionRegistration:
    """PartitionRegistration.merge: fields the change carries replace the
    current ones; a new leader bumps the leader epoch; every change bumps
    the partition epoch."""
    replicas = tuple(change.replicas) if change.replicas is not None else current.replicas
    isr = tuple(change.isr) if change.isr is not None else current.isr
    leader, leader_epoch = current.leader, current.leader_epoch
    if change.leader != NO_LEADER_CHANGE:
        leader, leader_epoch = change.leader, current.leader_epoch + 1
    removing = (
        tuple(change.removing_replicas)
        if change.removing_replicas is not None
        else current.removing_replicas
    )
    adding = (
        tuple(change.adding_replicas)
        if change.adding_replicas is not None
        else current.adding_replicas
    )
    if change.directories is not None:
        directories = tuple(change.directories)
    elif change.replicas is not None and current.directories:
        # Kafka's DirectoryId.createDirectoriesFrom: a kept replica keeps its
        # dir, a new one is UNASSIGNED until its broker says.
        old = dict(zip(current.replicas, current.directories))
        directories = tuple(old.get(r, DIRECTORY_UNASSIGNED) for r in replicas)
    else:
        directories = current.directories
    return PartitionRegistration(
        replicas,
        isr,
        leader if leader != NO_LEADER else NO_LEADER,
        leader_epoch,
        current.partition_epoch + 1,
        removing,
        adding,
        current.eligible_leader_replicas,
        current.last_known_elr,
        directories,
    )


def _directories(registration: PartitionRegistration) -> tuple[uuid.UUID, ...]:
    """One dir per replica (MIGRATING where the log has none: written
    before KIP-858)."""
    if len(registration.directories) == len(registration.replicas):
        return registration.directories
    return (DIRECTORY_MIGRATING,) * len(registration.replicas)


def _directory_of(registration: PartitionRegistration, broker: int) -> uuid.UUID | None:
    """The log dir of ``broker``'s replica, None if it is not a replica."""
    if broker not in registration.replicas:
        return None
    return _directories(registration)[registration.replicas.index(broker)]


def _valid_isr(replicas: Sequence[int], isr: Sequence[int]) -> bool:
    """Kafka's Replicas.validateIsr: distinct non-negative ids, all replicas."""
    return len(set(isr)) == len(isr) and all(r >= 0 and r in replicas for r in isr)
