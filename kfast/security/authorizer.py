"""StandardAuthorizer: Kafka's KRaft authorizer
(org.apache.kafka.metadata.authorizer.StandardAuthorizer) over the ACLs of
the metadata log.

The broker's metadata publisher feeds it (``load`` with every ACL of an
image, ``apply`` with a commit's changes by ACL id); handlers ask it
through ``RequestContext.authorize``. The rules, as StandardAuthorizerData:

* a principal named in ``super.users`` is allowed everything;
* the ACLs that apply to a resource are its LITERAL ACLs, the LITERAL ``*``
  ACLs of its type, and the PREFIXED ACLs whose prefix starts its name;
* of those, an ACL matches a request when its principal is the request's or
  ``User:*``, its host is the client's address or ``*``, and its operation
  is the one asked, ALL, or -- for ALLOW ACLs only -- one that implies it
  (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
  DESCRIBE_CONFIGS);
* a matching DENY wins over any ALLOW; else a matching ALLOW allows; else,
  when no ACL at all applies to the resource, ``allow.everyone.if.no.acl
  .found`` decides; else the request is denied.

A check never scans every ACL: literal ACLs are found by (type, name), and
prefixed ones by looking up only the prefix lengths some PREFIXED ACL of
that type has.

    authorizer = StandardAuthorizer(super_users={"User:admin"})
    authorizer.load({acl_id: Acl(...), ...})
    authorizer.authorize(principal, "127.0.0.1", ACL_OPERATION_READ,
                         ACL_RESOURCE_TOPIC, "orders")          # -> bool
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping

from kfast.config import ConfigException
from kfast.protocol.constants import (
    ACL_OPERATION_ALL,
    ACL_OPERATION_ALTER,
    ACL_OPERATION_ALTER_CONFIGS,
    ACL_OPERATION_DELETE,
    ACL_OPERATION_DESCRIBE,
    ACL_OPERATION_DESCRIBE_CONFIGS,
    ACL_OPERATION_READ,
    ACL_OPERATION_WRITE,
    ACL_PERMISSION_ALLOW,
    ACL_PERMISSION_DENY,
    ACL_WILDCARD_HOST,
    ACL_WILDCARD_PRINCIPAL,
    ACL_WILDCARD_RESOURCE,
    PATTERN_TYPE_LITERAL,
    PATTERN_TYPE_PREFIXED,
)
from kfast.security.acl import SUPPORTED_OPERATIONS, Acl, AclFilter

logger = logging.getLogger("kfast.authorizer")

# authorizer.class.name values that select this authorizer: Kafka's KRaft
# authorizer, and kfast's own name for it.
AUTHORIZER_CLASS_NAMES = frozenset(
    {
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kfast.security.authorizer.StandardAuthorizer",
    }
)

# What an ALLOW ACL on an operation also allows (StandardAuthorizerData's
# IMPLIES_DESCRIBE and IMPLIES_DESCRIBE_CONFIGS).
_IMPLIED_BY = {
    ACL_OPERATION_DESCRIBE: frozenset(
        {
            ACL_OPERATION_DESCRIBE,
            ACL_OPERATION_READ,
            ACL_OPERATION_WRITE,
            ACL_OPERATION_DELETE,
            ACL_OPERATION_ALTER,
        }
    ),
    ACL_OPERATION_DESCRIBE_CONFIGS: frozenset(
        {ACL_OPERATION_DESCRIBE_CONFIGS, ACL_OPERATION_ALTER_CONFIGS}
    ),
}

_ALLOWED, _DENIED = 1, 2


def parse_super_users(value: str | None) -> frozenset[str]:
    """super.users: principals separated by semicolons (Kafka's format)."""
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


def acl_result(acl: Acl, principal: str, host: str, operation: int) -> int:
    """_ALLOWED / _DENIED if ``acl`` matches the request, else 0
    (StandardAuthorizerData.findResult); the resource is matched by the
    caller."""
    if acl.principal != principal and acl.principal != ACL_WILDCARD_PRINCIPAL:
        return 0
    if acl.host != ACL_WILDCARD_HOST and acl.host != host:
        return 0
    if acl.operation != ACL_OPERATION_ALL:
        if acl.permission_type == ACL_PERMISSION_ALLOW:
            implied = _IMPLIED_BY.get(operation)
            if implied is not None:
                if acl.operation not in implied:
                    return 0
            elif acl.operation != operation:
                return 0
        elif acl.operation != operation:
            return 0
    if acl.permission_type == ACL_PERMISSION_ALLOW:
        return _ALLOWED
    return _DENIED if acl.permission_type == ACL_PERMISSION_DENY else 0


class StandardAuthorizer:
    def __init__(
        self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False
    ):
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._by_id: dict[uuid.UUID, Acl] = {}
        # (resource type, name) -> ACLs, LITERAL and PREFIXED apart.
        self._literal: dict[tuple[int, str], list[Acl]] = {}
        self._prefixed: dict[tuple[int, str], list[Acl]] = {}
        # resource type -> how many PREFIXED ACLs have each prefix length.
        self._prefix_lengths: dict[int, Counter] = {}
        self._lengths_cache: dict[int, tuple[int, ...]] = {}

    @classmethod
    def from_config(cls, config) -> StandardAuthorizer | None:
        """The authorizer ``authorizer.class.name`` selects, or None when it
        is empty (no authorization, as Kafka)."""
        name = (config["authorizer.class.name"] or "").strip()
        if not name:
            return None
        if name not in AUTHORIZER_CLASS_NAMES:
            raise ConfigException(
                "authorizer.class.name",
                name,
                "kfast implements only " + " / ".join(sorted(AUTHORIZER_CLASS_NAMES)),
            )
        return cls(
            parse_super_users(config["super.users"]), bool(config["allow.everyone.if.no.acl.found"])
        )

    # -- the ACLs, from the metadata publisher ----------------------------------------------
    def load(self, acls: Mapping[uuid.UUID, Acl]) -> None:
        """Replace every ACL (a new image: start, or a snapshot loaded)."""
        self._by_id.clear()
        self._literal.clear()
        self._prefixed.clear()
        self._prefix_lengths.clear()
        self._lengths_cache.clear()
        self.apply(acls)

    def apply(self, changes: Mapping[uuid.UUID, Acl | None]) -> None:
        """One commit's ACL changes: id -> the new ACL, or None if removed."""
        for acl_id, acl in changes.items():
            old = self._by_id.pop(acl_id, None)
            if old is not None:
                self._unindex(old)
            if acl is not None:
                self._by_id[acl_id] = acl
                self._index(acl)

    def _bucket(self, acl: Acl) -> dict:
        return self._prefixed if acl.pattern_type == PATTERN_TYPE_PREFIXED else self._literal

    def _index(self, acl: Acl) -> None:
        self._bucket(acl).setdefault((acl.resource_type, acl.resource_name), []).append(acl)
        if acl.pattern_type == PATTERN_TYPE_PREFIXED:
            self._prefix_lengths.setdefault(acl.resource_type, Counter())[
                len(acl.resource_name)
            ] += 1
            self._lengths_cache.pop(acl.resource_type, None)

    def _unindex(self, acl: Acl) -> None:
        bucket = self._bucket(acl)
        key = (acl.resource_type, acl.resource_name)
        entries = bucket[key]
        entries.remove(acl)
        if not entries:
            del bucket[key]
        if acl.pattern_type == PATTERN_TYPE_PREFIXED:
            lengths = self._prefix_lengths[acl.resource_type]
            lengths[len(acl.resource_name)] -= 1
            if not lengths[len(acl.resource_name)]:
                del lengths[len(acl.resource_name)]
            self._lengths_cache.pop(acl.resource_type, None)

    def _lengths(self, resource_type: int) -> tuple[int, ...]:
        lengths = self._lengths_cache.get(resource_type)
        if lengths is None:
            lengths = tuple(sorted(self._prefix_lengths.get(resource_type, ())))
            self._lengths_cache[resource_type] = lengths
        return lengths

    def _applicable(self, resource_type: int, name: str):
        """Every ACL that applies to the resource: literal, wildcard, prefixes."""
        literal = self._literal
        acls = literal.get((resource_type, name))
        if acls:
            yield from acls
        if name != ACL_WILDCARD_RESOURCE:
            acls = literal.get((resource_type, ACL_WILDCARD_RESOURCE))
            if acls:
                yield from acls
        prefixed = self._prefixed
        for length in self._lengths(resource_type):
            if length > len(name):
                break
            acls = prefixed.get((resource_type, name[:length]))
            if acls:
                yield from acls

    # -- checks --------------------------------------------------------------------------------
    def authorize(
        self, principal, host: str, operation: int, resource_type: int, name: str
    ) -> bool:
        """Whether ``principal`` (a KafkaPrincipal or its string) from
        ``host`` may perform ``operation`` on the resource."""
        return self.decide(principal, host, operation, resource_type, name)[0]

    def decide(
        self, principal, host: str, operation: int, resource_type: int, name: str
    ) -> tuple[bool, str]:
        """``authorize``'s answer and the rule that gave it, named as in
        kafka.authorizer.logger's lines (StandardAuthorizerData's
        MatchingRule: SuperUser, MatchingAcl(acl=...), DefaultAllow,
        DefaultDeny)."""
        principal = str(principal)
        if principal in self.super_users:
            return True, "SuperUser"
        found, allowing = False, None
        for acl in self._applicable(resource_type, name):
            found = True
            result = acl_result(acl, principal, host, operation)
            if result == _DENIED:
                return False, f"MatchingAcl(acl={acl.standard_str()})"
            if result == _ALLOWED and allowing is None:
                allowing = acl
        if allowing is not None:
            return True, f"MatchingAcl(acl={allowing.standard_str()})"
        if self.allow_everyone_if_no_acl_found and not found:
            return True, "DefaultAllow"
        return False, "DefaultDeny"

    def authorized_operations(self, principal, host: str, resource_type: int, name: str) -> int:
        """The authorized-operations bitfield of a resource: every operation
        its type supports that ``authorize`` allows (Kafka's
        AuthHelper.authorizedOperations)."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits

    def authorize_by_resource_type(
        self, principal, host: str, operation: int, resource_type: int
    ) -> bool:
        """Whether some resource of the type could be authorized: an ALLOW
        on a literal or prefix that no DENY of the same principal covers
        (Kafka's Authorizer.authorizeByResourceType, used where a producer
        with WRITE on any topic may be idempotent)."""
        principal = str(principal)
        # A made-up name first: super users, and allow.everyone.if.no.acl.found
        # when no wildcard or prefix ACL covers it.
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        wildcard_allow = False
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow_literal: set[str] = set()
        allow_prefixed: set[str] = set()
        for (rtype, _), acls in (*self._literal.items(), *self._prefixed.items()):
            if rtype != resource_type:
                continue
            for acl in acls:
                if acl.host != host and acl.host != ACL_WILDCARD_HOST:
                    continue
                if acl.principal != principal and acl.principal != ACL_WILDCARD_PRINCIPAL:
                    continue
                if acl.operation != operation and acl.operation != ACL_OPERATION_ALL:
                    continue
                literal = acl.pattern_type == PATTERN_TYPE_LITERAL
                if acl.permission_type == ACL_PERMISSION_DENY:
                    if literal and acl.resource_name == ACL_WILDCARD_RESOURCE:
                        return False
                    (deny_literal if literal else deny_prefixed).add(acl.resource_name)
                elif acl.permission_type == ACL_PERMISSION_ALLOW:
                    if literal and acl.resource_name == ACL_WILDCARD_RESOURCE:
                        wildcard_allow = True
                        continue
                    (allow_literal if literal else allow_prefixed).add(acl.resource_name)
        if wildcard_allow:
            return True
        for literal, names in ((True, allow_literal), (False, allow_prefixed)):
            for name in names:
                if literal and name in deny_literal:
                    continue
                if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                    return True
        return False

    # -- DescribeAcls and the control of ACLs ---------------------------------------------------
    def acls(self, acl_filter: AclFilter) -> list[Acl]:
        """Every ACL the filter matches (DescribeAcls on a broker)."""
        return [acl for acl in self._by_id.values() if acl_filter.matches(acl)]

    def __len__(self) -> int:
        return len(self._by_id)
