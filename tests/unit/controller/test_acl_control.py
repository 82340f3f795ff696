"""AclControlManager through the QuorumController: CreateAcls / DeleteAcls
records, Kafka's validation errors, replay on restart and from a snapshot."""

from __future__ import annotations

import asyncio

from kfast.controller.acl_control import AclControlManager
from kfast.controller.controller_result import MAX_RECORDS_PER_USER_OP
from kfast.controller.metadata.records import AccessControlEntryRecord
from kfast.controller.snapshot import image_records
from kfast.protocol import errors
from kfast.protocol.constants import (
    ACL_OPERATION_ANY,
    ACL_OPERATION_READ,
    ACL_OPERATION_UNKNOWN,
    ACL_OPERATION_WRITE,
    ACL_PERMISSION_ALLOW,
    ACL_PERMISSION_ANY,
    ACL_PERMISSION_DENY,
    ACL_RESOURCE_ANY,
    ACL_RESOURCE_CLUSTER,
    ACL_RESOURCE_TOPIC,
    PATTERN_TYPE_ANY,
    PATTERN_TYPE_LITERAL,
    PATTERN_TYPE_MATCH,
    PATTERN_TYPE_PREFIXED,
    PATTERN_TYPE_UNKNOWN,
)
from kfast.security.acl import Acl, AclFilter

from .memory_controller import InMemoryController, make_controller

READ = Acl(
    ACL_RESOURCE_TOPIC,
    "orders",
    PATTERN_TYPE_LITERAL,
    "User:alice",
    "*",
    ACL_OPERATION_READ,
    ACL_PERMISSION_ALLOW,
)
PREFIX = Acl(
    ACL_RESOURCE_TOPIC,
    "ord",
    PATTERN_TYPE_PREFIXED,
    "User:bob",
    "*",
    ACL_OPERATION_WRITE,
    ACL_PERMISSION_DENY,
)
EVERYTHING = AclFilter(
    ACL_RESOURCE_ANY, None, PATTERN_TYPE_ANY, None, None, ACL_OPERATION_ANY, ACL_PERMISSION_ANY
)


def controller(path, log=None) -> InMemoryController:
    return make_controller(path, log)


def test_create_validate_delete_and_replay(tmp_path):
    async def main():
        c = controller(tmp_path)
        await c.start()
        bad = [
            READ._replace(resource_type=ACL_RESOURCE_ANY),
            READ._replace(pattern_type=PATTERN_TYPE_MATCH),
            READ._replace(operation=ACL_OPERATION_UNKNOWN),
            READ._replace(permission_type=ACL_PERMISSION_ANY),
            READ._replace(resource_type=ACL_RESOURCE_CLUSTER),
            READ._replace(resource_name=""),
            READ._replace(principal="alice"),
        ]
        results = await c.create_acls([READ, PREFIX, READ, *bad])
        assert results[:3] == [None, None, None]
        assert all(isinstance(r, errors.InvalidRequestException) for r in results[3:])
        assert "kafka-cluster" in str(results[7]) and "colon" in str(results[9])
        offset = c.image.offset
        assert await c.create_acls([READ]) == [None] and c.image.offset == offset  # no record
        assert sorted(c.image.acls.values()) == sorted([READ, PREFIX])
        # MATCH finds the ACLs that apply to a name, two filters delete one ACL once.
        match = EVERYTHING._replace(
            resource_type=ACL_RESOURCE_TOPIC,
            resource_name="orders",
            pattern_type=PATTERN_TYPE_MATCH,
        )
        unknown = EVERYTHING._replace(pattern_type=PATTERN_TYPE_UNKNOWN)
        results = await c.delete_acls([match, EVERYTHING._replace(principal="User:bob"), unknown])
        assert results[0] == (None, [READ, PREFIX]) or results[0] == (None, [PREFIX, READ])
        assert results[1] == (None, [PREFIX])
        assert isinstance(results[2][0], errors.InvalidRequestException)
        assert not c.image.acls
        await c.create_acls([PREFIX])
        await c.shutdown()
        again = controller(tmp_path, c.log)  # a restart: the log replayed
        await again.start()
        assert list(again.image.acls.values()) == [PREFIX]
        # A snapshot carries the ACLs with their ids: replayed, the same state.
        fresh = AclControlManager()
        for record in image_records(again.image, 0):
            if isinstance(record, AccessControlEntryRecord):
                fresh.replay(record)
        assert fresh.acls == dict(again.image.acls)
        await again.shutdown()

    asyncio.run(main())


def test_too_many_acls_in_one_request_is_a_policy_violation(tmp_path):
    async def main():
        c = controller(tmp_path)
        await c.start()
        acls = [READ._replace(resource_name=f"t{i}") for i in range(MAX_RECORDS_PER_USER_OP + 1)]
        try:
            await c.create_acls(acls)
        except errors.PolicyViolationException:
            pass
        else:
            raise AssertionError("expected POLICY_VIOLATION")
        assert not c.image.acls
        await c.shutdown()

    asyncio.run(main())
