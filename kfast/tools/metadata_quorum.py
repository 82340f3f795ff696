"""``kfast metadata-quorum``: describe and change the KRaft quorum, like kafka-metadata-quorum.sh.

    kfast metadata-quorum --bootstrap-controller H:P[,H:P] describe --status
    kfast metadata-quorum --bootstrap-server H:P describe --replication [--human-readable]
    kfast metadata-quorum --bootstrap-controller H:P --command-config new.properties \
        add-controller [--dry-run]
    kfast metadata-quorum --bootstrap-controller H:P remove-controller \
        --controller-id N --controller-directory-id D [--dry-run]

``add-controller`` reads the joining controller's own server.properties
(``--command-config``): its node.id, the directory.id in the meta.properties
of its metadata log directory, and its (advertised) controller listeners;
it sends AddRaftVoter, which the quorum's leader answers once the new voter
set is committed (the new controller must already be running and caught up
with the metadata log). ``remove-controller`` sends RemoveRaftVoter. Both
go to the active controller (the one DescribeCluster names), and print
Kafka's lines; a refusal prints the error and exits 1.

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

from kfast.protocol import (
    AddRaftVoterRequest,
    DescribeClusterRequest,
    DescribeQuorumRequest,
    RemoveRaftVoterRequest,
    errors,
)
from kfast.protocol.constants import ENDPOINT_TYPE_BROKER, ENDPOINT_TYPE_CONTROLLER, ZERO_UUID

EXIT_FAILURE = 1
_METADATA_TOPIC = "__cluster_metadata"
# AddRaftVoter's timeout_ms, as Kafka's admin client sets it (request.timeout.ms).
_VOTER_CHANGE_TIMEOUT_MS = 30_000


def _addresses(text: str) -> list[tuple[str, int]]:
    out = []
    for item in text.split(","):
        host, _, port = item.strip().rpartition(":")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    return out


def _query(addresses, endpoint_type: int):
    """(cluster id, leader's DescribeQuorum partition data, voter endpoints
    {id: ["NAME://host:port"]}) from the first address that leads the quorum."""
    from kfast.client.connection import BlockingConnection

    request = DescribeQuorumRequest(
        topics=[
            DescribeQuorumRequest.TopicData(
                topic_name=_METADATA_TOPIC,
                partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)],
            )
        ]
    )
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
                endpoints = {
                    node.node_id: [
                        _endpoint_text(l.name, l.host, l.port) for l in node.listeners if l.name
                    ]
                    for node in response.nodes or ()
                }
                return cluster.cluster_id, partition, endpoints

        except Exception as exc:  # the next address may answer
            last_error = f"{host}:{port}: {exc}"
    raise RuntimeError(last_error)


def _endpoint_text(name: str, host: str, port: int) -> str:
    """RaftVoterEndpoint.toString: IPv6 hosts in brackets."""
    return f"{name}://[{host}]:{port}" if ":" in host else f"{name}://{host}:{port}"


def _directory_text(directory_id) -> str:
    from kfast.storage.meta_properties import uuid_base64

    return "null" if directory_id in (None, ZERO_UUID) else f'"{uuid_base64(directory_id)}"'


def _status(cluster_id: str, quorum, endpoints: dict | None = None) -> str:
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

    def node(replica):
        text = (
            f'{{"id": {replica.replica_id}, "directoryId": '
            f"{_directory_text(replica.replica_directory_id)}"
        )
        known = (endpoints or {}).get(replica.replica_id)
        if known:
            text += ', "endpoints": [' + ", ".join(f'"{e}"' for e in known) + "]"
        return text + "}"

    def nodes(replicas):
        return "[" + ", ".join(node(r) for r in replicas) + "]"

    return (
        f"ClusterId:              {cluster_id}\n"
        f"LeaderId:               {quorum.leader_id}\n"
        f"LeaderEpoch:            {quorum.leader_epoch}\n"
        f"HighWatermark:          {quorum.high_watermark}\n"
        f"MaxFollowerLag:         {max_lag}\n"
        f"MaxFollowerLagTimeMs:   {max_lag_ms}\n"
        f"CurrentVoters:          {nodes(quorum.current_voters)}\n"
        f"CurrentObservers:       {nodes(quorum.observers)}"
    )


def _replication(quorum, human_readable: bool) -> str:
    from kfast.storage.meta_properties import uuid_base64

    voters = {v.replica_id: v for v in quorum.current_voters}
    leader = voters[quorum.leader_id]
    now = int(time.time() * 1000)

    def when(timestamp: int, _what: str) -> str:
        if timestamp < 0:
            return "-1"
        return f"{max(0, now - timestamp)} ms ago" if human_readable else str(timestamp)

    rows = []
    ordered = (
        [("Leader", leader)]
        + [("Follower", v) for v in quorum.current_voters if v.replica_id != quorum.leader_id]
        + [("Observer", o) for o in quorum.observers]
    )
    for status, replica in ordered:
        rows.append(
            [
                str(replica.replica_id),
                uuid_base64(replica.replica_directory_id or ZERO_UUID),
                str(replica.log_end_offset),
                str(leader.log_end_offset - replica.log_end_offset),
                when(replica.last_fetch_timestamp, "last fetch"),
                when(replica.last_caught_up_timestamp, "last caught up"),
                status,
            ]
        )
    header = [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header))]
    # Kafka's ToolsUtils.prettyPrintTable: columns left-aligned, two spaces apart.
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
        for row in [header] + rows
    )


def describe(args) -> int:
    if bool(args.bootstrap_server) == bool(args.bootstrap_controller):
        print(
            "kfast metadata-quorum: give exactly one of --bootstrap-server and "
            "--bootstrap-controller",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    if args.status == args.replication:
        print(
            "kfast metadata-quorum: describe takes one of --status and --replication",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    endpoint_type = ENDPOINT_TYPE_CONTROLLER if args.bootstrap_controller else ENDPOINT_TYPE_BROKER
    try:
        cluster_id, quorum, endpoints = _query(
            _addresses(args.bootstrap_controller or args.bootstrap_server), endpoint_type
        )
    except RuntimeError as exc:
        print(f"kfast metadata-quorum: cannot describe the quorum: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(
        _status(cluster_id, quorum, endpoints)
        if args.status
        else _replication(quorum, args.human_readable)
    )
    return 0


# -- add-controller / remove-controller (KIP-853) ------------------------------------------
class _Refused(Exception):
    """kafka-metadata-quorum.sh's TerseException: a one-line refusal."""


def _read_properties(path: str) -> dict:
    from kfast.config import parse_properties

    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as exc:
        raise _Refused(f"cannot read {path}: {exc}") from None


def _controller_id(props: dict) -> int:
    if "node.id" not in props:
        raise _Refused(
            "node.id not found in configuration file. Is this a valid controller "
            "configuration file?"
        )
    node_id = int(props["node.id"])
    if node_id < 0:
        raise _Refused(
            "node.id was negative in configuration file. Is this a valid "
            "controller configuration file?"
        )
    if "controller" not in str(props.get("process.roles", "")):
        raise _Refused(
            "process.roles did not contain 'controller' in configuration file. Is "
            "this a valid controller configuration file?"
        )
    return node_id


def _metadata_directory_id(props: dict):
    from kfast.storage.meta_properties import parse_uuid_base64, read_meta_properties

    directory = props.get("metadata.log.dir") or (
        str(props.get("log.dirs") or props.get("log.dir") or "").split(",")[0].strip()
    )
    if not directory:
        raise _Refused(
            "Neither metadata.log.dir nor log.dirs were found. Is this a valid "
            "controller configuration file?"
        )
    meta = read_meta_properties(directory)
    if meta is None:
        raise _Refused(f"Unable to read meta.properties from {directory}")
    if not meta.directory_id:
        raise _Refused(f"No directory id found in {directory}")
    return parse_uuid_base64(meta.directory_id)


def _controller_endpoints(props: dict) -> list[tuple[str, str, int]]:
    """The controller listeners as kafka-metadata-quorum.sh reads them:
    advertised.listeners over listeners, an unnamed host as localhost."""
    from kfast.server.broker import parse_listener

    listeners = {}
    for key in ("listeners", "advertised.listeners"):
        for uri in str(props.get(key, "")).split(","):
            if uri.strip():
                name, host, port = parse_listener(uri.strip())
                listeners[name] = (name, host or "localhost", port)
    if "controller.listener.names" not in props:
        raise _Refused(
            "controller.listener.names was not found. Is this a valid controller "
            "configuration file?"
        )
    out = []
    for name in str(props["controller.listener.names"]).split(","):
        name = name.strip().upper()
        if name not in listeners:
            raise _Refused(f"Cannot find information about controller listener name: {name}")
        out.append(listeners[name])
    return out


def _send_to_active_controller(addresses, request):
    """The active controller's answer to ``request``: DescribeCluster (the
    controller endpoint type) names it; a controller that is no longer the
    leader answers NOT_LEADER_OR_FOLLOWER and the next address is tried."""
    from kfast.client.connection import BlockingConnection

    last_error = "no address answered"
    ordered = list(addresses)
    for host, port in list(ordered):
        try:
            with BlockingConnection(host, port, request_timeout=10) as connection:
                cluster = connection.send(
                    DescribeClusterRequest(endpoint_type=ENDPOINT_TYPE_CONTROLLER)
                )
                active = {b.broker_id: (b.host, b.port) for b in cluster.brokers}.get(
                    cluster.controller_id
                )
                if active is not None and active not in ordered[:1]:
                    ordered.insert(0, active)
                break
        except Exception as exc:  # the next address may answer
            last_error = f"{host}:{port}: {exc}"
    timeout = _VOTER_CHANGE_TIMEOUT_MS / 1000 + 10
    for host, port in dict.fromkeys(ordered):
        try:
            with BlockingConnection(host, port, request_timeout=timeout) as connection:
                response = connection.send(request)
        except Exception as exc:
            last_error = f"{host}:{port}: {exc}"
            continue
        if response.error_code == errors.NotLeaderOrFollowerException.code:
            last_error = f"{host}:{port}: NotLeaderOrFollowerException"
            continue
        return response
    raise RuntimeError(last_error)


def _voter_change_error(response) -> str | None:
    if not response.error_code:
        return None
    name = errors.for_code(response.error_code).__name__
    message = getattr(response, "error_message", None)
    return f"{name}: {message}" if message else name


def add_controller(args) -> int:
    if not args.bootstrap_controller and not args.bootstrap_server:
        print("kfast metadata-quorum: give --bootstrap-controller", file=sys.stderr)
        return EXIT_FAILURE
    if not args.command_config:
        print(
            "kfast metadata-quorum: You must supply the configuration file of the controller "
            "you are adding when using add-controller.",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    try:
        props = _read_properties(args.command_config)
        controller_id = _controller_id(props)
        directory_id = _metadata_directory_id(props)
        endpoints = _controller_endpoints(props)
    except (_Refused, ValueError) as exc:
        print(f"kfast metadata-quorum: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    from kfast.storage.meta_properties import uuid_base64

    if not args.dry_run:
        request = AddRaftVoterRequest(
            cluster_id=None,
            timeout_ms=_VOTER_CHANGE_TIMEOUT_MS,
            voter_id=controller_id,
            voter_directory_id=directory_id,
            listeners=[
                AddRaftVoterRequest.Listener(name=n, host=h, port=p) for n, h, p in endpoints
            ],
        )
        try:
            response = _send_to_active_controller(
                _addresses(args.bootstrap_controller or args.bootstrap_server), request
            )
        except RuntimeError as exc:
            print(f"kfast metadata-quorum: cannot add the controller: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        error = _voter_change_error(response)
        if error:
            print(f"kfast metadata-quorum: {error}", file=sys.stderr)
            return EXIT_FAILURE
    print(
        f"{'DRY RUN of adding' if args.dry_run else 'Added'} controller {controller_id} with "
        f"directory id {uuid_base64(directory_id)} and endpoints: "
        + ", ".join(_endpoint_text(n, h, p) for n, h, p in endpoints)
    )
    return 0


def remove_controller(args) -> int:
    from kfast.storage.meta_properties import parse_uuid_base64, uuid_base64

    if not args.bootstrap_controller and not args.bootstrap_server:
        print("kfast metadata-quorum: give --bootstrap-controller", file=sys.stderr)
        return EXIT_FAILURE
    if args.controller_id < 0:
        print(
            f"kfast metadata-quorum: Invalid negative --controller-id: {args.controller_id}",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    try:
        directory_id = parse_uuid_base64(args.controller_directory_id)
    except ValueError as exc:
        print(
            f"kfast metadata-quorum: Failed to parse --controller-directory-id: {exc}",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    if not args.dry_run:
        request = RemoveRaftVoterRequest(
            cluster_id=None, voter_id=args.controller_id, voter_directory_id=directory_id
        )
        try:
            response = _send_to_active_controller(
                _addresses(args.bootstrap_controller or args.bootstrap_server), request
            )
        except RuntimeError as exc:
            print(f"kfast metadata-quorum: cannot remove the controller: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        error = _voter_change_error(response)
        if error:
            print(f"kfast metadata-quorum: {error}", file=sys.stderr)
            return EXIT_FAILURE
    print(
        f"{'DRY RUN of removing ' if args.dry_run else 'Removed '} KRaft controller "
        f"{args.controller_id} with directory id {uuid_base64(directory_id)}"
    )
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "metadata-quorum",
        help="describe the KRaft quorum (like kafka-metadata-quorum.sh)",
        description="Describe the KRaft metadata quorum.",
    )
    p.add_argument(
        "--bootstrap-server", metavar="HOST:PORT", help="brokers to ask (comma-separated)"
    )
    p.add_argument(
        "--bootstrap-controller", metavar="HOST:PORT", help="controllers to ask (comma-separated)"
    )
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="add-controller: the server.properties of the controller to add",
    )
    actions = p.add_subparsers(dest="quorum_command", metavar="ACTION")
    actions.required = True
    d = actions.add_parser("describe", help="the quorum's leader, voters and observers")
    d.add_argument("--status", action="store_true", help="the leader, epoch, lag, voters")
    d.add_argument("--replication", action="store_true", help="one row per replica")
    d.add_argument(
        "--human-readable", action="store_true", help="times as 'N ms ago' (with --replication)"
    )
    d.set_defaults(handler=describe)
    a = actions.add_parser(
        "add-controller", help="Add a controller to the KRaft controller cluster"
    )
    a.add_argument(
        "--dry-run", action="store_true", help="print what would be done, but do not do it"
    )
    a.set_defaults(handler=add_controller)
    r = actions.add_parser(
        "remove-controller", help="Remove a controller from the KRaft controller cluster"
    )
    r.add_argument(
        "--controller-id", "-i", type=int, required=True, help="the id of the controller to remove"
    )
    r.add_argument(
        "--controller-directory-id",
        "-d",
        required=True,
        help="the directory id of the controller to remove",
    )
    r.add_argument(
        "--dry-run", action="store_true", help="print what would be done, but do not do it"
    )
    r.set_defaults(handler=remove_controller)
