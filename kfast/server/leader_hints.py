"""Leader discovery in error responses (KIP-951).

A Produce (v10+) answer of NOT_LEADER_OR_FOLLOWER, or a Fetch (v16+) answer
of NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, carries the partition's
current leader and leader epoch as this broker's metadata knows them, and
the response lists that leader's endpoint on the listener the request came
in on (Kafka's KafkaApis.getCurrentLeader). A client moves its batches or
fetch position to the new leader from that, without a Metadata round trip
first -- the gap a producer sees when a leadership moves (controlled
shutdown, preferred election) is that round trip shorter.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from kfast.controller.metadata.image import MetadataImage

if TYPE_CHECKING:
    from kfast.protocol import FetchResponse, ProduceResponse
    from kfast.server.apis import RequestContext


class CurrentLeader(NamedTuple):
    leader_id: int  # -1 when unknown
    leader_epoch: int  # -1 when unknown
    host: str | None  # None: no endpoint on the request's listener
    port: int
    rack: str | None


UNKNOWN = CurrentLeader(-1, -1, None, -1, None)


def current_leader(
    image: MetadataImage | None, topic: str, partition: int, listener_name: str
) -> CurrentLeader:
    registration = None if image is None else image.partition(topic, partition)
    if image is None or registration is None:
        return UNKNOWN
    broker = image.brokers.get(registration.leader)
    if broker is not None and not broker.fenced:
        endpoint = broker.listeners.get(listener_name)
        if endpoint is not None:
            return CurrentLeader(
                registration.leader,
                registration.leader_epoch,
                endpoint.host,
                endpoint.port,
                broker.rack,
            )
    return CurrentLeader(registration.leader, registration.leader_epoch, None, -1, None)


def fill(
    ctx: RequestContext,
    hinted: Iterable[
        tuple[str, int, ProduceResponse.PartitionProduceResponse | FetchResponse.PartitionData]
    ],
    response_type: type[ProduceResponse] | type[FetchResponse],
    node_endpoints: list[Any],  # of response_type.NodeEndpoint
) -> None:
    """For each (topic, partition, partition response) in ``hinted``: set
    the response's current_leader and add the leader's endpoint to
    ``node_endpoints`` (once per node). ``response_type`` is the response
    class (its nested LeaderIdAndEpoch and NodeEndpoint types)."""
    image = ctx.broker.metadata_image
    listed = {endpoint.node_id for endpoint in node_endpoints}
    for topic, partition, partition_response in hinted:
        leader = current_leader(image, topic, partition, ctx.listener_name)
        partition_response.current_leader = response_type.LeaderIdAndEpoch(
            leader_id=leader.leader_id, leader_epoch=leader.leader_epoch
        )
        if leader.host is not None and leader.leader_id not in listed:
            listed.add(leader.leader_id)
            node_endpoints.append(
                response_type.NodeEndpoint(
                    node_id=leader.leader_id, host=leader.host, port=leader.port, rack=leader.rack
                )
            )
