"""What a coordinator runtime needs of the broker that hosts it.

A coordinator (the group coordinator today, the transaction coordinator
later) keeps its state in the partitions of an internal topic
(__consumer_offsets, __transaction_state) and runs on whichever broker
leads them. It must not know that broker: the server builds a
PartitionWriter for the topic (kfast.server.coordinator_partition_writer)
and hands it to the runtime with the timer and the config. Kafka splits the
same boundary into PartitionWriter (append, learn the high watermark) and
CoordinatorLoader (read a partition back); kfast's runtime also asks, per
request, whether this broker leads a partition, so one small interface
carries all three.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kfast.storage.log import Log


class ConfigLookup(Protocol):
    """The broker's configuration as a coordinator reads it: a value by
    Kafka's name (a KafkaConfig in the broker, a dict in unit tests)."""

    def __getitem__(self, name: str) -> Any:
        """The value of config ``name``, of the type its definition gives."""


class CoordinatorReplica(Protocol):
    """This broker's replica of one partition of the internal topic."""

    @property
    def is_leader(self) -> bool:
        """Whether this broker leads the partition now."""

    @property
    def leader_epoch(self) -> int:
        """The partition's leader epoch (a change means reloading)."""

    @property
    def log(self) -> Log:
        """The partition's log, read to replay the coordinator's records
        (read(), log_start_offset, log_end_offset)."""


class PartitionWriter(Protocol):
    """The internal topic's partitions on the hosting broker, by index."""

    def replica(self, index: int) -> CoordinatorReplica | None:
        """This broker's replica of partition ``index``; None if it has none."""

    def metadata_leader(self, index: int) -> int | None:
        """The broker id the cluster metadata names as the leader of partition
        ``index``; None while the partition does not exist."""

    @property
    def node_id(self) -> int:
        """The hosting broker's id (compared with metadata_leader)."""

    def append(
        self, index: int, batch: bytes, timeout_ms: int, on_committed: Callable[[int], None]
    ) -> None:
        """Append a record batch to partition ``index`` as its leader and call
        ``on_committed(error_code)`` once: 0 when the high watermark covers
        the batch, else the produce error (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT
        after ``timeout_ms``, ...). It may be called before append returns."""
