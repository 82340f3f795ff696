"""ACLs and ACL filters (Kafka's AclBinding / AclBindingFilter, flattened as
its StandardAcl is).

An ACL says: ``principal`` from ``host`` is ALLOWed or DENYed
``operation`` on the resources its pattern names -- a LITERAL name (``*``
for every resource of the type) or a PREFIXED name. A filter has the same
fields with ``None`` for "any" in its strings and ANY codes in its enums;
its pattern type may also be MATCH (every ACL that applies to one named
resource). The codes are Kafka's (kfast.protocol.constants); the names
below are the enums' Java names, as kafka-acls.sh prints them.

    acl = Acl(ACL_RESOURCE_TOPIC, "orders", PATTERN_TYPE_LITERAL, "User:alice", "*",
              ACL_OPERATION_READ, ACL_PERMISSION_ALLOW)
    validate_new_acl(acl)                                  # InvalidRequestException if not
    AclFilter(ACL_RESOURCE_ANY, None, PATTERN_TYPE_ANY, None, None,
              ACL_OPERATION_ANY, ACL_PERMISSION_ANY).matches(acl)   # True
"""

from __future__ import annotations

from typing import NamedTuple

from kfast.protocol import errors
from kfast.protocol.constants import (
    ACL_OPERATION_ALL,
    ACL_OPERATION_ALTER,
    ACL_OPERATION_ALTER_CONFIGS,
    ACL_OPERATION_ANY,
    ACL_OPERATION_CLUSTER_ACTION,
    ACL_OPERATION_CREATE,
    ACL_OPERATION_CREATE_TOKENS,
    ACL_OPERATION_DELETE,
    ACL_OPERATION_DESCRIBE,
    ACL_OPERATION_DESCRIBE_CONFIGS,
    ACL_OPERATION_DESCRIBE_TOKENS,
    ACL_OPERATION_IDEMPOTENT_WRITE,
    ACL_OPERATION_READ,
    ACL_OPERATION_TWO_PHASE_COMMIT,
    ACL_OPERATION_UNKNOWN,
    ACL_OPERATION_WRITE,
    ACL_PERMISSION_ALLOW,
    ACL_PERMISSION_ANY,
    ACL_PERMISSION_DENY,
    ACL_PERMISSION_UNKNOWN,
    ACL_RESOURCE_ANY,
    ACL_RESOURCE_CLUSTER,
    ACL_RESOURCE_DELEGATION_TOKEN,
    ACL_RESOURCE_GROUP,
    ACL_RESOURCE_TOPIC,
    ACL_RESOURCE_TRANSACTIONAL_ID,
    ACL_RESOURCE_UNKNOWN,
    ACL_RESOURCE_USER,
    ACL_WILDCARD_RESOURCE,
    CLUSTER_RESOURCE_NAME,
    PATTERN_TYPE_ANY,
    PATTERN_TYPE_LITERAL,
    PATTERN_TYPE_MATCH,
    PATTERN_TYPE_PREFIXED,
    PATTERN_TYPE_UNKNOWN,
)

# Kafka's enum names by code (ResourceType, PatternType, AclOperation,
# AclPermissionType).
RESOURCE_TYPE_NAMES = {
    ACL_RESOURCE_UNKNOWN: "UNKNOWN",
    ACL_RESOURCE_ANY: "ANY",
    ACL_RESOURCE_TOPIC: "TOPIC",
    ACL_RESOURCE_GROUP: "GROUP",
    ACL_RESOURCE_CLUSTER: "CLUSTER",
    ACL_RESOURCE_TRANSACTIONAL_ID: "TRANSACTIONAL_ID",
    ACL_RESOURCE_DELEGATION_TOKEN: "DELEGATION_TOKEN",
    ACL_RESOURCE_USER: "USER",
}
# SecurityUtils.resourceTypeName: how kafka.authorizer.logger names them.
RESOURCE_TYPE_LOG_NAMES = {
    ACL_RESOURCE_TOPIC: "Topic",
    ACL_RESOURCE_GROUP: "Group",
    ACL_RESOURCE_CLUSTER: "Cluster",
    ACL_RESOURCE_TRANSACTIONAL_ID: "TransactionalId",
    ACL_RESOURCE_DELEGATION_TOKEN: "DelegationToken",
    ACL_RESOURCE_USER: "User",
}
PATTERN_TYPE_NAMES = {
    PATTERN_TYPE_UNKNOWN: "UNKNOWN",
    PATTERN_TYPE_ANY: "ANY",
    PATTERN_TYPE_MATCH: "MATCH",
    PATTERN_TYPE_LITERAL: "LITERAL",
    PATTERN_TYPE_PREFIXED: "PREFIXED",
}
OPERATION_NAMES = {
    ACL_OPERATION_UNKNOWN: "UNKNOWN",
    ACL_OPERATION_ANY: "ANY",
    ACL_OPERATION_ALL: "ALL",
    ACL_OPERATION_READ: "READ",
    ACL_OPERATION_WRITE: "WRITE",
    ACL_OPERATION_CREATE: "CREATE",
    ACL_OPERATION_DELETE: "DELETE",
    ACL_OPERATION_ALTER: "ALTER",
    ACL_OPERATION_DESCRIBE: "DESCRIBE",
    ACL_OPERATION_CLUSTER_ACTION: "CLUSTER_ACTION",
    ACL_OPERATION_DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS",
    ACL_OPERATION_ALTER_CONFIGS: "ALTER_CONFIGS",
    ACL_OPERATION_IDEMPOTENT_WRITE: "IDEMPOTENT_WRITE",
    ACL_OPERATION_CREATE_TOKENS: "CREATE_TOKENS",
    ACL_OPERATION_DESCRIBE_TOKENS: "DESCRIBE_TOKENS",
    ACL_OPERATION_TWO_PHASE_COMMIT: "TWO_PHASE_COMMIT",
}
PERMISSION_TYPE_NAMES = {
    ACL_PERMISSION_UNKNOWN: "UNKNOWN",
    ACL_PERMISSION_ANY: "ANY",
    ACL_PERMISSION_DENY: "DENY",
    ACL_PERMISSION_ALLOW: "ALLOW",
}

# The operations an ACL on each resource type can grant (Kafka's
# AclEntry.supportedOperations); authorized-operations bitfields are taken
# over these.
SUPPORTED_OPERATIONS = {
    ACL_RESOURCE_TOPIC: (
        ACL_OPERATION_READ,
        ACL_OPERATION_WRITE,
        ACL_OPERATION_CREATE,
        ACL_OPERATION_DESCRIBE,
        ACL_OPERATION_DELETE,
        ACL_OPERATION_ALTER,
        ACL_OPERATION_DESCRIBE_CONFIGS,
        ACL_OPERATION_ALTER_CONFIGS,
    ),
    ACL_RESOURCE_GROUP: (
        ACL_OPERATION_READ,
        ACL_OPERATION_DESCRIBE,
        ACL_OPERATION_DELETE,
        ACL_OPERATION_DESCRIBE_CONFIGS,
        ACL_OPERATION_ALTER_CONFIGS,
    ),
    ACL_RESOURCE_CLUSTER: (
        ACL_OPERATION_CREATE,
        ACL_OPERATION_CLUSTER_ACTION,
        ACL_OPERATION_DESCRIBE_CONFIGS,
        ACL_OPERATION_ALTER_CONFIGS,
        ACL_OPERATION_IDEMPOTENT_WRITE,
        ACL_OPERATION_ALTER,
        ACL_OPERATION_DESCRIBE,
    ),
    ACL_RESOURCE_TRANSACTIONAL_ID: (
        ACL_OPERATION_DESCRIBE,
        ACL_OPERATION_WRITE,
        ACL_OPERATION_TWO_PHASE_COMMIT,
    ),
    ACL_RESOURCE_DELEGATION_TOKEN: (ACL_OPERATION_DESCRIBE,),
    ACL_RESOURCE_USER: (ACL_OPERATION_CREATE_TOKENS, ACL_OPERATION_DESCRIBE_TOKENS),
}


class Acl(NamedTuple):
    """One ACL (Kafka's StandardAcl): a resource pattern and an entry."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str  # "<type>:<name>", "User:*" for every user
    host: str  # an IP address, "*" for every host
    operation: int
    permission_type: int

    def __str__(self) -> str:
        # The form kafka-acls.sh lists an entry in (AccessControlEntry.toString).
        return (
            f"(principal={self.principal}, host={self.host}, "
            f"operation={OPERATION_NAMES.get(self.operation, 'UNKNOWN')}, "
            f"permissionType={PERMISSION_TYPE_NAMES.get(self.permission_type, 'UNKNOWN')})"
        )

    def standard_str(self) -> str:
        """StandardAcl.toString (the rule of an authorizer log line)."""
        return (
            f"StandardAcl(resourceType="
            f"{RESOURCE_TYPE_NAMES.get(self.resource_type, 'UNKNOWN')}, "
            f"resourceName={self.resource_name}, "
            f"patternType={PATTERN_TYPE_NAMES.get(self.pattern_type, 'UNKNOWN')}, "
            f"principal={self.principal}, host={self.host}, "
            f"operation={OPERATION_NAMES.get(self.operation, 'UNKNOWN')}, "
            f"permissionType={PERMISSION_TYPE_NAMES.get(self.permission_type, 'UNKNOWN')})"
        )

    def pattern_str(self) -> str:
        """ResourcePattern.toString: the resource an ACL list groups under."""
        return (
            f"ResourcePattern(resourceType="
            f"{RESOURCE_TYPE_NAMES.get(self.resource_type, 'UNKNOWN')}, "
            f"name={self.resource_name}, "
            f"patternType={PATTERN_TYPE_NAMES.get(self.pattern_type, 'UNKNOWN')})"
        )


class AclFilter(NamedTuple):
    """Kafka's AclBindingFilter: None strings and ANY codes match anything."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def is_unknown(self) -> bool:
        """A filter with an UNKNOWN part (or a code Kafka does not define)
        matches nothing Kafka can name; it is refused with INVALID_REQUEST."""
        return (
            RESOURCE_TYPE_NAMES.get(self.resource_type, "UNKNOWN") == "UNKNOWN"
            or PATTERN_TYPE_NAMES.get(self.pattern_type, "UNKNOWN") == "UNKNOWN"
            or OPERATION_NAMES.get(self.operation, "UNKNOWN") == "UNKNOWN"
            or PERMISSION_TYPE_NAMES.get(self.permission_type, "UNKNOWN") == "UNKNOWN"
        )

    def matches(self, acl: Acl) -> bool:
        return self.matches_pattern(acl) and self.matches_entry(acl)

    def matches_pattern(self, acl: Acl) -> bool:
        # ResourcePatternFilter.matches
        if self.resource_type != ACL_RESOURCE_ANY and self.resource_type != acl.resource_type:
            return False
        if (
            self.pattern_type not in (PATTERN_TYPE_ANY, PATTERN_TYPE_MATCH)
            and self.pattern_type != acl.pattern_type
        ):
            return False
        name = self.resource_name
        if name is None:
            return True
        if self.pattern_type in (PATTERN_TYPE_ANY, acl.pattern_type):
            return name == acl.resource_name
        # MATCH: the ACLs that apply to the resource ``name``.
        if acl.pattern_type == PATTERN_TYPE_LITERAL:
            return name == acl.resource_name or acl.resource_name == ACL_WILDCARD_RESOURCE
        return acl.pattern_type == PATTERN_TYPE_PREFIXED and name.startswith(acl.resource_name)

    def matches_entry(self, acl: Acl) -> bool:
        # AccessControlEntryFilter.matches
        return (
            (self.principal is None or self.principal == acl.principal)
            and (self.host is None or self.host == acl.host)
            and self.operation in (ACL_OPERATION_ANY, acl.operation)
            and self.permission_type in (ACL_PERMISSION_ANY, acl.permission_type)
        )


def validate_new_acl(acl: Acl) -> None:
    """Kafka's checks before an ACL is stored (AclApis + AclControlManager
    .validateNewAcl + CreateAclsRequest): InvalidRequestException if not."""
    if RESOURCE_TYPE_NAMES.get(acl.resource_type, "UNKNOWN") in ("UNKNOWN", "ANY"):
        raise errors.InvalidRequestException(
            f"Invalid resourceType {RESOURCE_TYPE_NAMES.get(acl.resource_type, 'UNKNOWN')}"
        )
    if acl.pattern_type not in (PATTERN_TYPE_LITERAL, PATTERN_TYPE_PREFIXED):
        raise errors.InvalidRequestException(
            f"Invalid patternType {PATTERN_TYPE_NAMES.get(acl.pattern_type, 'UNKNOWN')}"
        )
    if OPERATION_NAMES.get(acl.operation, "UNKNOWN") in ("UNKNOWN", "ANY"):
        raise errors.InvalidRequestException(
            f"Invalid operation {OPERATION_NAMES.get(acl.operation, 'UNKNOWN')}"
        )
    if acl.permission_type not in (ACL_PERMISSION_DENY, ACL_PERMISSION_ALLOW):
        raise errors.InvalidRequestException(
            f"Invalid permissionType {PERMISSION_TYPE_NAMES.get(acl.permission_type, 'UNKNOWN')}"
        )
    if acl.resource_type == ACL_RESOURCE_CLUSTER and acl.resource_name != CLUSTER_RESOURCE_NAME:
        raise errors.InvalidRequestException(
            f"The only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}"
        )
    if not acl.resource_name:
        raise errors.InvalidRequestException("Invalid empty resource name")
    if ":" not in acl.principal:
        raise errors.InvalidRequestException(
            f"Could not parse principal from `{acl.principal}` (no colon is present "
            f"separating the principal type from the principal name)"
        )
