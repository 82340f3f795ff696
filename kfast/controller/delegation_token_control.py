"""DelegationTokenControlManager: delegation tokens as metadata records
(Kafka's DelegationTokenControlManager, KIP-900).

State: token id -> TokenInformation, built from DelegationTokenRecords (a
new token, or a new expiry for one) and RemoveDelegationTokenRecords, plus
the index base64(HMAC) -> token id by which Renew and Expire name a token.
The feature is on only when ``delegation.token.secret.key`` is set; then
every operation answers as Kafka's controller:

* create: the owner is the request's owner if it names one, else the
  requester; max timestamp = now + min(delegation.token.max.lifetime.ms,
  the request's max lifetime if > 0); expiry = min(max timestamp, now +
  delegation.token.expiry.time.ms); a renewer that is not a User is
  INVALID_PRINCIPAL_TYPE;
* renew: unknown HMAC DELEGATION_TOKEN_NOT_FOUND, past its expiry or max
  timestamp DELEGATION_TOKEN_EXPIRED, a principal neither owner nor renewer
  DELEGATION_TOKEN_OWNER_MISMATCH; new expiry = min(max timestamp, now +
  min(expiry.time.ms, the renew period if > 0));
* expire: NOT_FOUND, then OWNER_MISMATCH; a negative period removes the
  token at once (expiry = now), an expired token is DELEGATION_TOKEN_EXPIRED,
  else expiry = min(max timestamp, now + period);
* sweep (every delegation.token.expiry.check.interval.ms on the active
  controller): a RemoveDelegationTokenRecord per expired token.

Sums saturate at 2^63 - 1 as Kafka's. Kafka also answers UNSUPPORTED_VERSION
below metadata.version 3.6-IV2; kfast's metadata.version is always newer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from kfast.controller.controller_result import ControllerResult
from kfast.controller.metadata.records import (
    DelegationTokenRecord,
    MetadataRecord,
    RemoveDelegationTokenRecord,
)
from kfast.protocol import errors
from kfast.security.delegation_token import TokenInformation, hmac_base64, token_hmac
from kfast.security.principal import USER_TYPE, KafkaPrincipal
from kfast.storage.meta_properties import random_uuid_base64

__all__ = ["CreatedToken", "DelegationTokenControlManager", "token_record"]

_LONG_MAX = (1 << 63) - 1


def _sum(now: int, duration: int) -> int:
    return _LONG_MAX if now > _LONG_MAX - duration else now + duration


def _refused(error: errors.KafkaError) -> ControllerResult[tuple[errors.KafkaError | None, int]]:
    """Renew's or Expire's refusal: the error, expiry -1 (Kafka's ErrorTimestamp)."""
    return ControllerResult((error, -1), [])


def token_record(token: TokenInformation) -> DelegationTokenRecord:
    return DelegationTokenRecord(
        owner=str(token.owner),
        requester=str(token.requester),
        renewers=[str(r) for r in token.renewers],
        issue_timestamp=token.issue_timestamp_ms,
        max_timestamp=token.max_timestamp_ms,
        expiration_timestamp=token.expiry_timestamp_ms,
        token_id=token.token_id,
    )


def token_from_record(record: DelegationTokenRecord) -> TokenInformation:
    return TokenInformation(
        token_id=record.token_id,
        owner=KafkaPrincipal.parse(record.owner),
        requester=KafkaPrincipal.parse(record.requester),
        renewers=tuple(KafkaPrincipal.parse(r) for r in record.renewers),
        issue_timestamp_ms=record.issue_timestamp,
        max_timestamp_ms=record.max_timestamp,
        expiry_timestamp_ms=record.expiration_timestamp,
    )


@dataclass(frozen=True, slots=True)
class CreatedToken:
    """CreateDelegationToken's answer: the error (None: created), and the
    token with its HMAC when created."""

    error: errors.KafkaError | None
    token: TokenInformation | None = None
    hmac: bytes = b""


class DelegationTokenControlManager:
    def __init__(
        self,
        secret: str | None,
        max_lifetime_ms: int,
        expiry_time_ms: int,
        clock_ms: Callable[[], int],
    ) -> None:
        # Kafka: an unset or empty secret disables the feature.
        self.secret = secret or None
        self.max_lifetime_ms = max_lifetime_ms
        self.expiry_time_ms = expiry_time_ms
        self.clock_ms = clock_ms
        self.tokens: dict[str, TokenInformation] = {}
        self._by_hmac: dict[str, str] = {}  # base64(HMAC) -> token id

    @property
    def enabled(self) -> bool:
        return self.secret is not None

    def _token_for_hmac(self, digest: bytes) -> TokenInformation | None:
        token_id = self._by_hmac.get(hmac_base64(digest))
        return None if token_id is None else self.tokens.get(token_id)

    def create_token(
        self,
        requester: KafkaPrincipal,
        owner: KafkaPrincipal | None,
        renewers: Iterable[KafkaPrincipal],
        max_lifetime_ms: int,
    ) -> ControllerResult[CreatedToken]:
        if self.secret is None:
            return ControllerResult(CreatedToken(errors.DelegationTokenDisabledException()), [])
        now = self.clock_ms()
        renewer_list = tuple(renewers)
        if any(r.principal_type != USER_TYPE for r in renewer_list):
            return ControllerResult(CreatedToken(errors.InvalidPrincipalTypeException()), [])
        lifetime = self.max_lifetime_ms
        if max_lifetime_ms > 0:
            lifetime = min(lifetime, max_lifetime_ms)
        max_timestamp = _sum(now, lifetime)
        token = TokenInformation(
            token_id=random_uuid_base64(),
            owner=requester if owner is None else owner,
            requester=requester,
            renewers=renewer_list,
            issue_timestamp_ms=now,
            max_timestamp_ms=max_timestamp,
            expiry_timestamp_ms=min(max_timestamp, _sum(now, self.expiry_time_ms)),
        )
        digest = token_hmac(self.secret, token.token_id)
        return ControllerResult(CreatedToken(None, token, digest), [token_record(token)])

    def _find(self, digest: bytes) -> TokenInformation | errors.KafkaError:
        """The token an HMAC names, or Kafka's first refusals of Renew and
        Expire: tokens disabled, no such token."""
        if self.secret is None:
            return errors.DelegationTokenDisabledException()
        token = self._token_for_hmac(digest)
        return errors.DelegationTokenNotFoundException() if token is None else token

    def renew_token(
        self, principal: KafkaPrincipal, digest: bytes, renew_period_ms: int
    ) -> ControllerResult[tuple[errors.KafkaError | None, int]]:
        """(error, new expiry timestamp; -1 on error)."""
        now = self.clock_ms()
        token = self._find(digest)
        if isinstance(token, errors.KafkaError):
            return _refused(token)
        if token.expired(now):
            return _refused(errors.DelegationTokenExpiredException())
        if not token.owner_or_renewer(principal):
            return _refused(errors.DelegationTokenOwnerMismatchException())
        period = self.expiry_time_ms
        if renew_period_ms > 0:
            period = min(period, renew_period_ms)
        expiry = min(token.max_timestamp_ms, _sum(now, period))
        renewed = replace(token, expiry_timestamp_ms=expiry)
        return ControllerResult((None, expiry), [token_record(renewed)])

    def expire_token(
        self, principal: KafkaPrincipal, digest: bytes, expiry_period_ms: int
    ) -> ControllerResult[tuple[errors.KafkaError | None, int]]:
        """(error, new expiry timestamp; -1 on error)."""
        now = self.clock_ms()
        token = self._find(digest)
        if isinstance(token, errors.KafkaError):
            return _refused(token)
        if not token.owner_or_renewer(principal):
            return _refused(errors.DelegationTokenOwnerMismatchException())
        if expiry_period_ms < 0:  # expire now: the token goes
            return ControllerResult(
                (None, now), [RemoveDelegationTokenRecord(token_id=token.token_id)]
            )
        if token.expired(now):
            return _refused(errors.DelegationTokenExpiredException())
        expiry = min(token.max_timestamp_ms, _sum(now, expiry_period_ms))
        return ControllerResult(
            (None, expiry), [token_record(replace(token, expiry_timestamp_ms=expiry))]
        )

    def sweep_expired_tokens(self) -> list[MetadataRecord]:
        now = self.clock_ms()
        return [
            RemoveDelegationTokenRecord(token_id=token_id)
            for token_id, token in self.tokens.items()
            if token.expired(now)
        ]

    def replay(self, record: DelegationTokenRecord | RemoveDelegationTokenRecord) -> None:
        if isinstance(record, DelegationTokenRecord):
            token = token_from_record(record)
            self.tokens[token.token_id] = token
            if self.secret is not None:
                self._by_hmac[hmac_base64(token_hmac(self.secret, token.token_id))] = token.token_id
            return
        # Kafka's replay of a removal of an unknown token is a no-op.
        if self.tokens.pop(record.token_id, None) is not None and self.secret is not None:
            self._by_hmac.pop(hmac_base64(token_hmac(self.secret, record.token_id)), None)
