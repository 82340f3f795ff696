"""StandardAuthorizer's matching against a brute-force oracle written from
Kafka's rules (StandardAuthorizerData), and its fixed cases: deny beats
allow, implied operations, wildcards, prefixes, super users,
allow.everyone.if.no.acl.found, authorizeByResourceType."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.config import ConfigException, KafkaConfig
from kfast.protocol.constants import (
    ACL_OPERATION_ALL,
    ACL_OPERATION_ALTER,
    ACL_OPERATION_ALTER_CONFIGS,
    ACL_OPERATION_CREATE,
    ACL_OPERATION_DELETE,
    ACL_OPERATION_DESCRIBE,
    ACL_OPERATION_DESCRIBE_CONFIGS,
    ACL_OPERATION_IDEMPOTENT_WRITE,
    ACL_OPERATION_READ,
    ACL_OPERATION_WRITE,
    ACL_PERMISSION_ALLOW,
    ACL_PERMISSION_DENY,
    ACL_RESOURCE_CLUSTER,
    ACL_RESOURCE_GROUP,
    ACL_RESOURCE_TOPIC,
    PATTERN_TYPE_LITERAL,
    PATTERN_TYPE_PREFIXED,
    authorized_operations,
)
from kfast.security.acl import Acl
from kfast.security.acl_publisher import AclPublisher
from kfast.security.authorizer import StandardAuthorizer
from kfast.security.principal import KafkaPrincipal

OPERATIONS = [
    ACL_OPERATION_ALL,
    ACL_OPERATION_READ,
    ACL_OPERATION_WRITE,
    ACL_OPERATION_CREATE,
    ACL_OPERATION_DELETE,
    ACL_OPERATION_ALTER,
    ACL_OPERATION_DESCRIBE,
    ACL_OPERATION_DESCRIBE_CONFIGS,
    ACL_OPERATION_ALTER_CONFIGS,
]
ASKED = [op for op in OPERATIONS if op != ACL_OPERATION_ALL]
NAMES = ["a", "ab", "abc", "b", "*"]
PRINCIPALS = ["User:alice", "User:bob", "User:*"]
HOSTS = ["10.0.0.1", "10.0.0.2", "*"]
TYPES = [ACL_RESOURCE_TOPIC, ACL_RESOURCE_GROUP]

acls_strategy = st.lists(
    st.builds(
        Acl,
        st.sampled_from(TYPES),
        st.sampled_from(NAMES),
        st.sampled_from([PATTERN_TYPE_LITERAL, PATTERN_TYPE_PREFIXED]),
        st.sampled_from(PRINCIPALS),
        st.sampled_from(HOSTS),
        st.sampled_from(OPERATIONS),
        st.sampled_from([ACL_PERMISSION_ALLOW, ACL_PERMISSION_DENY]),
    ),
    max_size=12,
)


def oracle(acls, allow_everyone, principal, host, operation, rtype, name) -> bool:
    """Kafka's rules, checking every ACL."""

    def applies(acl):
        if acl.resource_type != rtype:
            return False
        if acl.pattern_type == PATTERN_TYPE_LITERAL:
            return acl.resource_name in (name, "*")
        return name.startswith(acl.resource_name)

    def op_matches(acl):
        if acl.operation in (ACL_OPERATION_ALL, operation):
            return True
        if acl.permission_type != ACL_PERMISSION_ALLOW:
            return False
        if operation == ACL_OPERATION_DESCRIBE:
            return acl.operation in (
                ACL_OPERATION_READ,
                ACL_OPERATION_WRITE,
                ACL_OPERATION_DELETE,
                ACL_OPERATION_ALTER,
            )
        return (
            operation == ACL_OPERATION_DESCRIBE_CONFIGS
            and acl.operation == ACL_OPERATION_ALTER_CONFIGS
        )

    relevant = [a for a in acls if applies(a)]
    matching = [
        a
        for a in relevant
        if a.principal in (principal, "User:*") and a.host in (host, "*") and op_matches(a)
    ]
    if any(a.permission_type == ACL_PERMISSION_DENY for a in matching):
        return False
    if matching:
        return True
    return allow_everyone and not relevant


def authorizer_with(acls, **kwargs) -> StandardAuthorizer:
    authorizer = StandardAuthorizer(**kwargs)
    authorizer.load({uuid.uuid4(): acl for acl in acls})
    return authorizer


@pytest.mark.slow
@settings(max_examples=200)
@given(
    acls_strategy,
    st.booleans(),
    st.sampled_from(["User:alice", "User:bob"]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    st.sampled_from(ASKED),
    st.sampled_from(TYPES),
    st.sampled_from(NAMES + ["abcd", "c"]),
)
def test_authorize_agrees_with_the_oracle(
    acls, allow_everyone, principal, host, operation, rtype, name
):
    authorizer = authorizer_with(acls, allow_everyone_if_no_acl_found=allow_everyone)
    assert authorizer.authorize(
        KafkaPrincipal.parse(principal), host, operation, rtype, name
    ) == oracle(acls, allow_everyone, principal, host, operation, rtype, name)


@settings(max_examples=100)
@given(acls_strategy, acls_strategy, st.sampled_from(ASKED), st.sampled_from(NAMES + ["abcd"]))
def test_incremental_changes_equal_a_fresh_load(first, second, operation, name):
    """The publisher's apply/remove path leaves the same index as a load."""
    ids = {uuid.uuid4(): acl for acl in first}
    authorizer = StandardAuthorizer()
    publisher = AclPublisher(authorizer)

    class Delta:
        def __init__(self, changes):
            self.changed_acls = changes

    class Image:
        def __init__(self, acls):
            self.acls = acls

    publisher.on_metadata_update(Delta(dict(ids)), Image(ids))
    removed = {acl_id: None for acl_id in list(ids)[::2]}
    added = {uuid.uuid4(): acl for acl in second}
    now = {k: v for k, v in ids.items() if k not in removed} | added
    publisher.on_metadata_update(Delta(removed | added), Image(now))
    fresh = authorizer_with(now.values())
    for principal in ("User:alice", "User:bob"):
        for rtype in TYPES:
            assert authorizer.authorize(
                principal, "10.0.0.1", operation, rtype, name
            ) == fresh.authorize(principal, "10.0.0.1", operation, rtype, name)


def test_a_snapshot_that_drops_acls_reloads_the_authorizer():
    authorizer = StandardAuthorizer()
    publisher = AclPublisher(authorizer)
    acl = Acl(
        ACL_RESOURCE_TOPIC,
        "t",
        PATTERN_TYPE_LITERAL,
        "User:alice",
        "*",
        ACL_OPERATION_READ,
        ACL_PERMISSION_ALLOW,
    )

    class Delta:
        changed_acls: dict = {}

    class Image:
        acls = {uuid.uuid4(): acl}

    publisher.on_metadata_update(Delta(), Image())
    assert authorizer.authorize("User:alice", "h", ACL_OPERATION_READ, ACL_RESOURCE_TOPIC, "t")
    Image.acls = {}
    publisher.on_metadata_update(Delta(), Image())
    assert not authorizer.authorize("User:alice", "h", ACL_OPERATION_READ, ACL_RESOURCE_TOPIC, "t")


def _acl(
    name,
    op,
    permission=ACL_PERMISSION_ALLOW,
    principal="User:alice",
    pattern=PATTERN_TYPE_LITERAL,
    rtype=ACL_RESOURCE_TOPIC,
    host="*",
):
    return Acl(rtype, name, pattern, principal, host, op, permission)


def test_deny_beats_allow_and_implications_are_for_allow_only():
    authorizer = authorizer_with(
        [
            _acl("orders", ACL_OPERATION_READ),
            _acl("orders", ACL_OPERATION_WRITE),
            _acl("orders", ACL_OPERATION_WRITE, ACL_PERMISSION_DENY, principal="User:*"),
            _acl("orders", ACL_OPERATION_ALTER_CONFIGS),
        ]
    )
    ask = lambda op: authorizer.authorize("User:alice", "1.2.3.4", op, ACL_RESOURCE_TOPIC, "orders")
    assert ask(ACL_OPERATION_READ) and not ask(ACL_OPERATION_WRITE)
    assert ask(ACL_OPERATION_DESCRIBE) and ask(ACL_OPERATION_DESCRIBE_CONFIGS)
    assert not ask(ACL_OPERATION_DELETE)
    # A DENY of READ does not deny DESCRIBE.
    deny_read = authorizer_with(
        [_acl("t", ACL_OPERATION_ALL), _acl("t", ACL_OPERATION_READ, ACL_PERMISSION_DENY)]
    )
    assert deny_read.authorize("User:alice", "h", ACL_OPERATION_DESCRIBE, ACL_RESOURCE_TOPIC, "t")
    assert not deny_read.authorize("User:alice", "h", ACL_OPERATION_READ, ACL_RESOURCE_TOPIC, "t")
    assert authorizer.authorized_operations(
        "User:alice", "h", ACL_RESOURCE_TOPIC, "orders"
    ) == authorized_operations(
        ACL_OPERATION_READ,
        ACL_OPERATION_DESCRIBE,
        ACL_OPERATION_DESCRIBE_CONFIGS,
        ACL_OPERATION_ALTER_CONFIGS,
    )


def test_super_users_and_allow_everyone_if_no_acl_found():
    acls = [_acl("guarded", ACL_OPERATION_READ, principal="User:bob")]
    strict = authorizer_with(acls, super_users={"User:admin"})
    assert strict.authorize(
        KafkaPrincipal("User", "admin"),
        "h",
        ACL_OPERATION_ALTER,
        ACL_RESOURCE_CLUSTER,
        "kafka-cluster",
    )
    assert not strict.authorize("User:alice", "h", ACL_OPERATION_READ, ACL_RESOURCE_TOPIC, "open")
    lax = authorizer_with(acls, allow_everyone_if_no_acl_found=True)
    assert lax.authorize("User:alice", "h", ACL_OPERATION_READ, ACL_RESOURCE_TOPIC, "open")
    # An ACL on the resource, even for someone else, closes it.
    assert not lax.authorize("User:alice", "h", ACL_OPERATION_READ, ACL_RESOURCE_TOPIC, "guarded")


def test_hosts_and_prefixes():
    authorizer = authorizer_with(
        [_acl("logs-", ACL_OPERATION_READ, pattern=PATTERN_TYPE_PREFIXED, host="10.0.0.1")]
    )
    assert authorizer.authorize(
        "User:alice", "10.0.0.1", ACL_OPERATION_READ, ACL_RESOURCE_TOPIC, "logs-app"
    )
    assert not authorizer.authorize(
        "User:alice", "10.0.0.2", ACL_OPERATION_READ, ACL_RESOURCE_TOPIC, "logs-app"
    )
    assert not authorizer.authorize(
        "User:alice", "10.0.0.1", ACL_OPERATION_READ, ACL_RESOURCE_TOPIC, "logs"
    )


def test_authorize_by_resource_type():
    by_type = lambda acls: authorizer_with(acls).authorize_by_resource_type(
        "User:alice", "h", ACL_OPERATION_WRITE, ACL_RESOURCE_TOPIC
    )
    assert not by_type([])
    assert by_type([_acl("t", ACL_OPERATION_WRITE)])
    assert not by_type(
        [_acl("t", ACL_OPERATION_WRITE), _acl("t", ACL_OPERATION_WRITE, ACL_PERMISSION_DENY)]
    )
    assert not by_type(
        [
            _acl("tx", ACL_OPERATION_WRITE),
            _acl("t", ACL_OPERATION_WRITE, ACL_PERMISSION_DENY, pattern=PATTERN_TYPE_PREFIXED),
        ]
    )
    assert by_type([_acl("*", ACL_OPERATION_ALL)])
    assert not by_type(
        [_acl("*", ACL_OPERATION_ALL), _acl("*", ACL_OPERATION_WRITE, ACL_PERMISSION_DENY)]
    )
    assert not by_type([_acl("t", ACL_OPERATION_IDEMPOTENT_WRITE)])


def test_authorizer_from_config():
    assert StandardAuthorizer.from_config(KafkaConfig({})) is None
    authorizer = StandardAuthorizer.from_config(
        KafkaConfig(
            {
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin; User:ops",
                "allow.everyone.if.no.acl.found": "true",
            }
        )
    )
    assert authorizer.super_users == {"User:admin", "User:ops"}
    assert authorizer.allow_everyone_if_no_acl_found
    with pytest.raises(ConfigException, match="authorizer.class.name"):
        StandardAuthorizer.from_config(
            KafkaConfig({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
        )
