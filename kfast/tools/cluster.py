"""``kfast cluster``: the cluster id and broker unregistration, like kafka-cluster.sh.

    kfast cluster cluster-id --bootstrap-server H:P     # Cluster ID: <id>
    kfast cluster unregister --bootstrap-server H:P --id 4

``cluster-id`` asks DescribeCluster; ``unregister`` sends UnregisterBroker
(a broker forwards it to the active controller), which removes a broker's
registration after its leaderships move away. Output lines and exit
statuses are kafka-cluster.sh's; an error prints its message and exits 1.
"""

from __future__ import annotations

import sys

from kfast.protocol import DescribeClusterRequest, UnregisterBrokerRequest, errors
from kfast.tools.command_config import add_command_config, connection_options

EXIT_FAILURE = 1


def _connect(args):
    """A connection to the first of --bootstrap-server that answers, with
    the --command-config settings."""
    from kfast.client.connection import BlockingConnection

    options = connection_options(args, request_timeout=30)
    last: Exception | None = None
    for item in args.bootstrap_server.split(","):
        host, _, port = item.strip().rpartition(":")
        try:
            return BlockingConnection(host.strip("[]") or "127.0.0.1", int(port), **options)
        except Exception as exc:  # the next bootstrap server may answer
            last = exc
    raise ConnectionError(f"no bootstrap server answered: {last}")


def cluster_id(args) -> int:
    try:
        with _connect(args) as connection:
            response = connection.send(DescribeClusterRequest())
    except Exception as exc:
        print(exc, file=sys.stderr)
        return EXIT_FAILURE
    if response.error_code:
        print(
            response.error_message or errors.for_code(response.error_code).__name__, file=sys.stderr
        )
        return EXIT_FAILURE
    print(f"Cluster ID: {response.cluster_id}")
    return 0


def unregister(args) -> int:
    try:
        with _connect(args) as connection:
            response = connection.send(UnregisterBrokerRequest(broker_id=args.id))
    except Exception as exc:
        print(exc, file=sys.stderr)
        return EXIT_FAILURE
    if response.error_code:
        error = errors.for_code(response.error_code)
        print(
            f"{error.__name__}: {response.error_message or error.__doc__ or ''}".strip(),
            file=sys.stderr,
        )
        return EXIT_FAILURE
    print(f"Broker {args.id} is no longer registered.")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "cluster",
        help="cluster id and broker unregistration (like kafka-cluster.sh)",
        description="Cluster-wide operations, like kafka-cluster.sh.",
    )
    actions = p.add_subparsers(dest="cluster_command", metavar="ACTION")
    actions.required = True
    cid = actions.add_parser("cluster-id", help="print the cluster id")
    cid.add_argument("--bootstrap-server", "-b", required=True, metavar="HOST:PORT")
    add_command_config(cid)
    cid.set_defaults(handler=cluster_id)
    unreg = actions.add_parser("unregister", help="unregister a broker")
    unreg.add_argument("--bootstrap-server", "-b", required=True, metavar="HOST:PORT")
    add_command_config(unreg)
    unreg.add_argument("--id", "-i", type=int, required=True, help="the broker id")
    unreg.set_defaults(handler=unregister)
