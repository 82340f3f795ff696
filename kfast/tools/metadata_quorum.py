"""``kfast metadata-quorum``: describe the KRaft quorum, like kafka-metadata-quorum.sh.

    kfast metadata-quorum --bootstrap-controller H:P[,H:P] describe --status
    kfast metadata-quorum --bootstrap-server H:P describe --replication [--human-readable]

The tool asks each bootstrap address for DescribeQuorum until one answers
as the quorum's leader (a standby answers NOT_LEADER_OR_FOLLOWER), and for
DescribeCluster (the controller endpoint type on a controller, the broker
type on a broker) for the cluster id. The output is
kafka-metadata-quorum.sh's: ``--status`` prints ``Key: value`` lines,
``--replication`` a table with one row per voter and observer.
"""
from __future__ import annotations

import sys
import time

from kfast.protocol import DescribeClusterRequest, DescribeQuorumRequest, errors
from kfast.protocol.constants import ENDPOINT_TYPE_BROKER, ENDPOINT_TYPE_CONTROLLER

EXIT_FAILURE = 1
_METADATA_TOPIC = "__cluster_metadata"


def _addresses(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        host, _, port = item.strip().rpartition(":")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    return out


def _query(addresses, endpoint_type: int):
    """(cluster id, leader's DescribeQuorum partition data) from the first
    address that leads the quorum."""
    from kfast.client.connection import BlockingConnection

    request = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
        topic_name=_METADATA_TOPIC,
        partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)])])
    last_error = "no address answered"
    for host, port in addresses:
        try:
            with BlockingConnection(host, port, request_timeout=10) as connection:
                response = connection.send(request)
                partition = response.topics[0].partitions[0] if response.topics else None
                code = response.error_code or (partition.error_code if partition else 0)
                if code:
                    last_error = f"{host}:{port}: {errors.for_code(code).__name__}"
                    continue
                cluster = connection.send(DescribeClusterRequest(endpoint_type=endpoint_type))
                return cluster.cluster_id, partition
        except Exception as exc:  # the next address may answer
            last_error = f"{host}:{port}: {exc}"
    raise RuntimeError(last_error)


def _status(cluster_id: str, quorum) -> str:
    voters = {v.replica_id: v for v in quorum.current_voters}
    leader = voters.get(quorum.leader_id)
    lagging = min(quorum.current_voters, key=lambda v: v.log_end_offset)
    max_lag = leader.log_end_offset - lagging.log_end_offset if leader else -1
    if leader is None:
        max_lag_ms = -1
    elif lagging is leader or lagging.log_end_offset == leader.log_end_offset:
        max_lag_ms = 0
    elif leader.last_caught_up_timestamp >= 0 and lagging.last_caught_up_timestamp >= 0:
        max_lag_ms = leader.last_caught_up_timestamp - lagging.last_caught_up_timestamp
    else:
        max_lag_ms = -1

    def nodes(replicas):
        return "[" + ", ".join(f'{{"id": {r.replica_id}, "directoryId": null}}'
                               for r in replicas) + "]"
    return (f"ClusterId:              {cluster_id}\n"
            f"LeaderId:               {quorum.leader_id}\n"
            f"LeaderEpoch:            {quorum.leader_epoch}\n"
            f"HighWatermark:          {quorum.high_watermark}\n"
            f"MaxFollowerLag:         {max_lag}\n"
            f"MaxFollowerLagTimeMs:   {max_lag_ms}\n"
            f"CurrentVoters:          {nodes(quorum.current_voters)}\n"
            f"CurrentObservers:       {nodes(quorum.observers)}")


def _replication(quorum, human_readable: bool) -> str:
    voters = {v.replica_id: v for v in quorum.current_voters}
    leader = voters[quorum.leader_id]
    now = int(time.time() * 1000)

    def when(timestamp: int, _what: str) -> str:
        if timestamp < 0:
            return "-1"
        return f"{max(0, now - timestamp)} ms ago" if human_readable else str(timestamp)
    rows = []
    ordered = [("Leader", leader)] + [("Follower", v) for v in quorum.current_voters
                                      if v.replica_id != quorum.leader_id] + \
        [("Observer", o) for o in quorum.observers]
    for status, replica in ordered:
        rows.append([str(replica.replica_id), "AAAAAAAAAAAAAAAAAAAAAA",
                     str(replica.log_end_offset),
                     str(leader.log_end_offset - replica.log_end_offset),
                     when(replica.last_fetch_timestamp, "last fetch"),
                     when(replica.last_caught_up_timestamp, "last caught up"), status])
    header = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
              "LastCaughtUpTimestamp", "Status"]
    widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header))]
    # Kafka's ToolsUtils.prettyPrintTable: columns left-aligned, two spaces apart.
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in [header] + rows)


def describe(args) -> int:
    if bool(args.bootstrap_server) == bool(args.bootstrap_controller):
        print("kfast metadata-quorum: give exactly one of --bootstrap-server and "
              "--bootstrap-controller", file=sys.stderr)
        return EXIT_FAILURE
    if args.status == args.replication:
        print("kfast metadata-quorum: describe takes one of --status and --replication",
              file=sys.stderr)
        return EXIT_FAILURE
    endpoint_type = ENDPOINT_TYPE_CONTROLLER if args.bootstrap_controller else \
        ENDPOINT_TYPE_BROKER
    try:
        cluster_id, quorum = _query(_addresses(args.bootstrap_controller or
                                               args.bootstrap_server), endpoint_type)
    except RuntimeError as exc:
        print(f"kfast metadata-quorum: cannot describe the quorum: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(_status(cluster_id, quorum) if args.status else
          _replication(quorum, args.human_readable))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("metadata-quorum",
                              help="describe the KRaft quorum (like kafka-metadata-quorum.sh)",
                              description="Describe the KRaft metadata quorum.")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT",
                   help="brokers to ask (comma-separated)")
    p.add_argument("--bootstrap-controller", metavar="HOST:PORT",
                   help="controllers to ask (comma-separated)")
    actions = p.add_subparsers(dest="quorum_command", metavar="ACTION")
    actions.required = True
    d = actions.add_parser("describe", help="the quorum's leader, voters and observers")
    d.add_argument("--status", action="store_true", help="the leader, epoch, lag, voters")
    d.add_argument("--replication", action="store_true", help="one row per replica")
    d.add_argument("--human-readable", action="store_true",
                   help="times as 'N ms ago' (with --replication)")
    d.set_defaults(handler=describe)
