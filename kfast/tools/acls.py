"""``kfast acls``: add, list and remove ACLs, like kafka-acls.sh (Kafka's
AclCommand).

    kfast acls --bootstrap-server H:P --add --allow-principal User:alice \\
        --operation Read --operation Describe --topic orders [--group g]
    kfast acls --bootstrap-server H:P --add --deny-principal User:bob --deny-host 10.0.0.9 \\
        --operation Write --topic logs- --resource-pattern-type prefixed
    kfast acls --bootstrap-server H:P --add --producer --allow-principal User:p --topic t \\
        [--transactional-id tx] [--idempotent]
    kfast acls --bootstrap-server H:P --add --consumer --allow-principal User:c --topic t --group g
    kfast acls --bootstrap-server H:P --list [--topic orders] [--principal User:alice]
    kfast acls --bootstrap-server H:P --remove [--allow-principal ...] --topic orders [--force]

Resources: --topic, --group, --cluster, --transactional-id, --delegation-token,
--user-principal, each with --resource-pattern-type (LITERAL by default;
PREFIXED; ANY and MATCH only to --list and --remove). Operations are
Kafka's names in either spelling (Read, IdempotentWrite, IDEMPOTENT_WRITE),
All by default; hosts default to ``*``. The output is the Kafka tool's:

    Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:
     \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

    Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:
     \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

--remove asks for confirmation unless --force. A usage error prints its
message and exits 1; a failed request prints "Error while executing ACL
command: <message>" and exits 1, as AclCommand does.
"""

from __future__ import annotations

import asyncio
import re
import sys

from kfast.client.admin import KafkaAdmin
from kfast.config import ConfigException
from kfast.protocol import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    errors,
)
from kfast.protocol.constants import (
    ACL_OPERATION_ALL,
    ACL_OPERATION_ANY,
    ACL_OPERATION_CREATE,
    ACL_OPERATION_DESCRIBE,
    ACL_OPERATION_IDEMPOTENT_WRITE,
    ACL_OPERATION_READ,
    ACL_OPERATION_WRITE,
    ACL_PERMISSION_ALLOW,
    ACL_PERMISSION_ANY,
    ACL_PERMISSION_DENY,
    ACL_RESOURCE_ANY,
    ACL_RESOURCE_CLUSTER,
    ACL_RESOURCE_DELEGATION_TOKEN,
    ACL_RESOURCE_GROUP,
    ACL_RESOURCE_TOPIC,
    ACL_RESOURCE_TRANSACTIONAL_ID,
    ACL_RESOURCE_USER,
    ACL_WILDCARD_HOST,
    CLUSTER_RESOURCE_NAME,
    PATTERN_TYPE_ANY,
    PATTERN_TYPE_LITERAL,
    PATTERN_TYPE_MATCH,
    PATTERN_TYPE_PREFIXED,
)
from kfast.security.acl import (
    OPERATION_NAMES,
    PATTERN_TYPE_NAMES,
    RESOURCE_TYPE_NAMES,
    SUPPORTED_OPERATIONS,
    Acl,
)
from kfast.tools.command_config import add_command_config, admin_options

_PATTERN_TYPES = {
    PATTERN_TYPE_NAMES[c]: c
    for c in (PATTERN_TYPE_ANY, PATTERN_TYPE_MATCH, PATTERN_TYPE_LITERAL, PATTERN_TYPE_PREFIXED)
}
_OPERATIONS = {
    name: code for code, name in OPERATION_NAMES.items() if name not in ("UNKNOWN", "ANY")
}
# Resource options and the resource type each names.
_RESOURCE_OPTIONS = (
    ("topic", ACL_RESOURCE_TOPIC),
    ("group", ACL_RESOURCE_GROUP),
    ("transactional_id", ACL_RESOURCE_TRANSACTIONAL_ID),
    ("delegation_token", ACL_RESOURCE_DELEGATION_TOKEN),
    ("user_principal", ACL_RESOURCE_USER),
)


class UsageError(Exception):
    """Kafka's printUsageAndExit: the message, exit status 1."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "acls",
        help="add, list and remove ACLs (like kafka-acls.sh)",
        description="Manage the ACLs of a cluster whose brokers run an authorizer, like "
        "kafka-acls.sh.",
    )
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--add", action="store_true", help="add ACLs")
    p.add_argument("--remove", action="store_true", help="remove ACLs")
    p.add_argument("--list", action="store_true", help="list ACLs")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC")
    p.add_argument("--group", action="append", default=[], metavar="GROUP")
    p.add_argument("--cluster", action="store_true", help="the cluster resource")
    p.add_argument("--transactional-id", action="append", default=[], metavar="ID")
    p.add_argument("--delegation-token", action="append", default=[], metavar="TOKEN_ID")
    p.add_argument("--user-principal", action="append", default=[], metavar="PRINCIPAL")
    p.add_argument(
        "--resource-pattern-type",
        default="LITERAL",
        metavar="TYPE",
        help="LITERAL (default), PREFIXED; ANY or MATCH to list or remove",
    )
    p.add_argument(
        "--operation",
        action="append",
        default=[],
        metavar="OPERATION",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
        "AlterConfigs, DescribeConfigs, IdempotentWrite, CreateTokens, "
        "DescribeTokens, TwoPhaseCommit, All (default)",
    )
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    p.add_argument(
        "--principal",
        action="append",
        default=[],
        metavar="TYPE:NAME",
        help="--list: only the ACLs of this principal",
    )
    p.add_argument(
        "--producer",
        action="store_true",
        help="WRITE, DESCRIBE and CREATE on the topics (WRITE, DESCRIBE on transactional ids)",
    )
    p.add_argument(
        "--consumer",
        action="store_true",
        help="READ, DESCRIBE on the topics and READ on the groups",
    )
    p.add_argument(
        "--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster"
    )
    p.add_argument("--force", action="store_true", help="do not ask for confirmation")
    p.add_argument("--command-timeout", type=float, default=30.0, metavar="SECONDS")
    add_command_config(p)
    p.set_defaults(handler=run)


def run(args, out=None, err=None, stdin=None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        _check_args(args)
        if args.add:
            work = _resource_acls(args, adding=True)
        elif args.remove:
            work = _resource_acls(args, adding=False)
        else:
            work = None
    except UsageError as exc:
        err.write(f"{exc}\n")
        return 1
    try:
        return asyncio.run(_run(args, work, out, stdin or sys.stdin))
    except (TimeoutError, errors.KafkaError, OSError, ConfigException) as exc:
        out.write(f"Error while executing ACL command: {_message(exc)}\n")
        return 1


def _message(exc: Exception) -> str:
    if isinstance(exc, errors.KafkaError):
        return str(exc) or exc.message
    return str(exc) or type(exc).__name__


# -- arguments --------------------------------------------------------------------------
def _check_args(args) -> None:
    if sum((args.add, args.remove, args.list)) != 1:
        raise UsageError("Command must include exactly one action: --list, --add, --remove. ")
    if args.list and (
        args.producer
        or args.consumer
        or args.allow_host
        or args.allow_principal
        or args.deny_host
        or args.deny_principal
    ):
        raise UsageError(
            'Option "[list]" can\'t be used with option "[producer], [consumer], '
            '[allow-host], [allow-principal], [deny-host], [deny-principal]"'
        )
    for role in ("producer", "consumer"):
        if getattr(args, role) and (args.operation or args.deny_principal or args.deny_host):
            raise UsageError(
                f'Option "[{role}]" can\'t be used with option "[operation], '
                f'[deny-principal], [deny-host]"'
            )
    if args.principal and not args.list:
        raise UsageError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise UsageError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise UsageError("The --idempotent option is only available if --producer is set")
    if args.consumer and (
        not args.topic
        or not args.group
        or (not args.producer and (args.cluster or args.transactional_id))
    ):
        raise UsageError(
            "With --consumer you must specify a --topic and a --group and no "
            "--cluster or --transactional-id option should be specified."
        )
    pattern = args.resource_pattern_type.strip().upper()
    if pattern not in _PATTERN_TYPES:
        raise UsageError(f"Unknown resource-pattern-type: {args.resource_pattern_type}")
    args.pattern_type = _PATTERN_TYPES[pattern]
    if args.add and args.pattern_type not in (PATTERN_TYPE_LITERAL, PATTERN_TYPE_PREFIXED):
        raise UsageError(
            f"A '--resource-pattern-type' value of '{pattern}' is not valid when adding acls."
        )


def parse_operation(name: str) -> int:
    """Kafka's SecurityUtils.operation: "IdempotentWrite" or "IDEMPOTENT_WRITE"."""
    text = name.strip()
    if "_" not in text and not text.isupper():
        text = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", text)
    code = _OPERATIONS.get(text.upper())
    if code is None:
        raise UsageError(f"Unknown operation: {name}")
    return code


def operation_name(code: int) -> str:
    """Kafka's SecurityUtils.operationName: IDEMPOTENT_WRITE -> IdempotentWrite."""
    return "".join(word.capitalize() for word in OPERATION_NAMES[code].split("_"))


def _principal(text: str) -> str:
    principal_type, sep, name = text.strip().partition(":")
    if not sep or not principal_type:
        raise UsageError(
            f"expected a string in format principalType:principalName but got {text.strip()}"
        )
    return f"{principal_type}:{name}"


def _filters(args) -> list[tuple[int, str]]:
    """(resource type, name) of every resource option; the cluster only
    with LITERAL patterns."""
    filters = []
    for option, resource_type in _RESOURCE_OPTIONS:
        filters += [(resource_type, name.strip()) for name in getattr(args, option)]
    if args.pattern_type == PATTERN_TYPE_LITERAL and (args.cluster or args.idempotent):
        filters.append((ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME))
    return list(dict.fromkeys(filters))


def _entries(args, operations) -> list[tuple[str, str, int, int]]:
    """(principal, host, operation, permission) of the allow and deny options."""
    out = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, ACL_PERMISSION_ALLOW),
        (args.deny_principal, args.deny_host, ACL_PERMISSION_DENY),
    ):
        hosts = [h.strip() for h in hosts] or [ACL_WILDCARD_HOST]
        for principal in principals:
            for operation in operations:
                for host in hosts:
                    out.append((_principal(principal), host, operation, permission))
    return sorted(set(out))


def _resource_acls(args, adding: bool) -> list[tuple[tuple[int, str], list]]:
    """[((resource type, name), [entry])] for --add / --remove."""
    filters = _filters(args)
    if not filters:
        raise UsageError(
            "You must provide at least one resource: --topic <topic> or --cluster "
            "or --group <group> or --delegation-token <Delegation Token ID>"
        )
    work: dict[tuple[int, str], list] = {}
    if not args.producer and not args.consumer:
        operations = [parse_operation(o) for o in args.operation] or [ACL_OPERATION_ALL]
        for f in filters:
            work[f] = _entries(args, operations)
    if args.producer:
        for f in filters:
            if f[0] == ACL_RESOURCE_TOPIC:
                work[f] = _entries(
                    args, [ACL_OPERATION_WRITE, ACL_OPERATION_DESCRIBE, ACL_OPERATION_CREATE]
                )
            elif f[0] == ACL_RESOURCE_TRANSACTIONAL_ID:
                work[f] = _entries(args, [ACL_OPERATION_WRITE, ACL_OPERATION_DESCRIBE])
        if args.idempotent:
            work[(ACL_RESOURCE_CLUSTER, CLUSTER_RESOURCE_NAME)] = _entries(
                args, [ACL_OPERATION_IDEMPOTENT_WRITE]
            )
    if args.consumer:
        for f in filters:
            if f[0] == ACL_RESOURCE_TOPIC:
                work[f] = sorted(
                    set(work.get(f, []))
                    | set(_entries(args, [ACL_OPERATION_READ, ACL_OPERATION_DESCRIBE]))
                )
            elif f[0] == ACL_RESOURCE_GROUP:
                work[f] = _entries(args, [ACL_OPERATION_READ])
    for (resource_type, _), entries in work.items():
        valid = set(SUPPORTED_OPERATIONS[resource_type]) | {ACL_OPERATION_ALL}
        if any(e[2] not in valid for e in entries):
            raise UsageError(
                f"ResourceType {RESOURCE_TYPE_NAMES[resource_type]} only supports "
                f"operations {', '.join(operation_name(o) for o in sorted(valid))}"
            )
    if adding and any(not entries for entries in work.values()):
        raise UsageError(
            "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."
        )
    return list(work.items())


# -- output -------------------------------------------------------------------------------
def _pattern(resource_type: int, name: str | None, pattern_type: int) -> str:
    """ResourcePattern(Filter).toString."""
    return (
        f"ResourcePattern(resourceType={RESOURCE_TYPE_NAMES[resource_type]}, "
        f"name={'<any>' if name is None else name}, "
        f"patternType={PATTERN_TYPE_NAMES[pattern_type]})"
    )


def _entry(principal: str, host: str, operation: int, permission: int) -> str:
    return str(Acl(0, "", 0, principal, host, operation, permission))


def _block(title: str, lines: list[str]) -> str:
    # AclCommand: s"$title: $Newline ${acls.map("\t" + _).mkString(Newline)} $Newline" + println
    return f"{title}: \n " + "\n".join("\t" + line for line in lines) + " \n\n"


# -- requests -----------------------------------------------------------------------------
async def _run(args, work, out, stdin) -> int:
    admin = KafkaAdmin(
        args.bootstrap_server,
        **admin_options(
            args,
            client_id="kfast-acls",
            request_timeout=args.command_timeout,
            metadata_timeout=args.command_timeout,
        ),
    )
    await admin.start()
    try:
        if args.add:
            await _add(admin, args, work, out)
        elif args.remove:
            await _remove(admin, args, work, out, stdin)
        else:
            await _list(admin, args, out)
        return 0
    finally:
        await admin.close()


def _raise_for(code: int, message: str | None) -> None:
    if code:
        raise errors.for_code(code)(message or errors.for_code(code)().message)


async def _add(admin, args, work, out) -> None:
    for (resource_type, name), entries in work:
        out.write(
            _block(
                f"Adding ACLs for resource `{_pattern(resource_type, name, args.pattern_type)}`",
                [_entry(*e) for e in entries],
            )
        )
        response = await admin.cluster.send(
            None,
            CreateAclsRequest(
                creations=[
                    CreateAclsRequest.AclCreation(
                        resource_type=resource_type,
                        resource_name=name,
                        resource_pattern_type=args.pattern_type,
                        principal=principal,
                        host=host,
                        operation=operation,
                        permission_type=permission,
                    )
                    for principal, host, operation, permission in entries
                ]
            ),
        )
        for result in response.results:
            _raise_for(result.error_code, result.error_message)


async def _remove(admin, args, work, out, stdin) -> None:
    for (resource_type, name), entries in work:
        pattern = _pattern(resource_type, name, args.pattern_type)
        if not entries:
            question = (
                f"Are you sure you want to delete all ACLs for resource filter `{pattern}`? (y/n)"
            )
        else:
            question = (
                "Are you sure you want to remove ACLs: \n "
                + "\n".join("\t" + _entry(*e) for e in entries)
                + f" \n from resource filter `{pattern}`? (y/n)"
            )
        if not args.force:
            out.write(question + "\n")
            out.flush()
            if stdin.readline().strip().lower() != "y":
                continue
        Filter = DeleteAclsRequest.DeleteAclsFilter
        filters = [
            Filter(
                resource_type_filter=resource_type,
                resource_name_filter=name,
                pattern_type_filter=args.pattern_type,
                principal_filter=principal,
                host_filter=host,
                operation=operation,
                permission_type=permission,
            )
            for principal, host, operation, permission in entries
        ] or [
            Filter(
                resource_type_filter=resource_type,
                resource_name_filter=name,
                pattern_type_filter=args.pattern_type,
                principal_filter=None,
                host_filter=None,
                operation=ACL_OPERATION_ANY,
                permission_type=ACL_PERMISSION_ANY,
            )
        ]
        response = await admin.cluster.send(None, DeleteAclsRequest(filters=filters))
        for result in response.filter_results:
            _raise_for(result.error_code, result.error_message)


async def _describe(admin, resource_type: int, name: str | None, pattern_type: int) -> list:
    response = await admin.cluster.send(
        None,
        DescribeAclsRequest(
            resource_type_filter=resource_type,
            resource_name_filter=name,
            pattern_type_filter=pattern_type,
            principal_filter=None,
            host_filter=None,
            operation=ACL_OPERATION_ANY,
            permission_type=ACL_PERMISSION_ANY,
        ),
    )
    _raise_for(response.error_code, response.error_message)
    return response.resources


async def _list(admin, args, out) -> None:
    filters = _filters(args)
    if filters:
        resources = []
        for resource_type, name in filters:
            resources += await _describe(admin, resource_type, name, args.pattern_type)
    else:
        resources = await _describe(admin, ACL_RESOURCE_ANY, None, PATTERN_TYPE_ANY)
    by_pattern: dict[tuple, set] = {}
    for r in resources:
        by_pattern.setdefault((r.resource_type, r.resource_name, r.pattern_type), set()).update(
            (a.principal, a.host, a.operation, a.permission_type) for a in r.acls
        )
    principals: list[str | None] = [_principal(p) for p in args.principal]
    for principal in principals or [None]:
        if principal is not None:
            out.write(f"ACLs for principal `{principal}`\n")
        for pattern, entries in by_pattern.items():
            shown = sorted(e for e in entries if principal is None or e[0] == principal)
            if shown:
                out.write(
                    _block(
                        f"Current ACLs for resource `{_pattern(*pattern)}`",
                        [_entry(*e) for e in shown],
                    )
                )
