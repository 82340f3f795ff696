"""DelegationTokenControlManager against Kafka's DelegationTokenControlManager
rules, on a fake clock; and the tokens through a controller: committed as
records, in the image, kept by a snapshot."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from kfast.controller.delegation_token_control import DelegationTokenControlManager
from kfast.controller.metadata.records import (
    DelegationTokenRecord,
    RemoveDelegationTokenRecord,
    decode_record,
    encode_record,
)
from kfast.controller.snapshot import image_records
from kfast.protocol import errors
from kfast.security.delegation_token import token_hmac
from kfast.security.principal import KafkaPrincipal

from ..hypothesis_budget import examples
from .memory_controller import started

SECRET = "secret"
DAY = 24 * 3600 * 1000
WEEK = 7 * DAY
ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
CAROL = KafkaPrincipal("User", "carol")


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def manager(clock: Clock, secret: str | None = SECRET, max_life: int = WEEK, expiry: int = DAY):
    return DelegationTokenControlManager(secret, max_life, expiry, clock)


def create(m: DelegationTokenControlManager, owner=None, renewers=(BOB,), max_lifetime=-1):
    result = m.create_token(ALICE, owner, list(renewers), max_lifetime)
    for record in result.records:
        # Through the log's encoding, as a replica replays it.
        m.replay(decode_record(encode_record(record))[0])
    return result.response


def apply(m: DelegationTokenControlManager, result):
    for record in result.records:
        m.replay(decode_record(encode_record(record))[0])
    return result.response


def test_create_computes_kafkas_timestamps_and_hmac():
    clock = Clock()
    m = manager(clock)
    created = create(m, max_lifetime=3 * DAY)
    token = created.token
    assert created.error is None
    assert token.issue_timestamp_ms == clock.now
    assert token.max_timestamp_ms == clock.now + 3 * DAY
    assert token.expiry_timestamp_ms == clock.now + DAY
    assert created.hmac == token_hmac(SECRET, token.token_id)
    assert len(created.hmac) == 64  # HmacSHA512
    assert (token.owner, token.requester, token.renewers) == (ALICE, ALICE, (BOB,))
    assert m.tokens == {token.token_id: token}
    # A requested lifetime over the maximum (or none) gets the maximum.
    assert create(m, max_lifetime=30 * DAY).token.max_timestamp_ms == clock.now + WEEK
    # The owner the request names.
    assert create(m, owner=CAROL).token.owner == CAROL


def test_disabled_without_a_secret():
    m = manager(Clock(), secret="")
    result = m.create_token(ALICE, None, [], -1)
    assert isinstance(result.response.error, errors.DelegationTokenDisabledException)
    assert result.records == []
    for call in (m.renew_token, m.expire_token):
        error, expiry = call(ALICE, b"x", 1).response
        assert isinstance(error, errors.DelegationTokenDisabledException) and expiry == -1


def test_renewers_must_be_users():
    result = manager(Clock()).create_token(ALICE, None, [KafkaPrincipal("Group", "g")], -1)
    assert isinstance(result.response.error, errors.InvalidPrincipalTypeException)
    assert result.records == []


def test_renew_and_expire_errors():
    clock = Clock()
    m = manager(clock)
    created = create(m)
    hmac = created.hmac
    not_found = m.renew_token(ALICE, b"\0" * 64, -1).response[0]
    assert isinstance(not_found, errors.DelegationTokenNotFoundException)
    mismatch = m.renew_token(CAROL, hmac, -1).response[0]
    assert isinstance(mismatch, errors.DelegationTokenOwnerMismatchException)
    mismatch = m.expire_token(CAROL, hmac, -1).response[0]
    assert isinstance(mismatch, errors.DelegationTokenOwnerMismatchException)
    # The token flag does not change who a principal is.
    assert apply(m, m.renew_token(KafkaPrincipal("User", "bob", True), hmac, 10))[0] is None
    clock.now = created.token.expiry_timestamp_ms + 1
    expired = m.renew_token(ALICE, hmac, -1).response[0]
    assert isinstance(expired, errors.DelegationTokenExpiredException)
    expired = m.expire_token(ALICE, hmac, 5).response[0]
    assert isinstance(expired, errors.DelegationTokenExpiredException)
    # A negative period removes even an expired token.
    error, expiry = apply(m, m.expire_token(ALICE, hmac, -1))
    assert error is None and expiry == clock.now and m.tokens == {}
    assert isinstance(
        m.renew_token(ALICE, hmac, -1).response[0], errors.DelegationTokenNotFoundException
    )


@given(
    max_life=st.integers(1, 10 * WEEK),
    expiry_time=st.integers(1, 10 * DAY),
    requested_life=st.integers(-1, 20 * WEEK),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["renew", "expire"]), st.integers(0, 3 * DAY), st.integers(-1, 3 * DAY)
        ),
        max_size=8,
    ),
)
@settings(max_examples=examples(100), deadline=None)
def test_renew_and_expire_never_pass_the_max_timestamp(
    max_life, expiry_time, requested_life, steps
):
    clock = Clock()
    m = manager(clock, max_life=max_life, expiry=expiry_time)
    created = create(m, max_lifetime=requested_life)
    token = created.token
    limit = min(max_life, requested_life) if requested_life > 0 else max_life
    assert token.max_timestamp_ms == clock.now + limit
    assert token.expiry_timestamp_ms == min(token.max_timestamp_ms, clock.now + expiry_time)
    for action, elapsed, period in steps:
        clock.now += elapsed
        current = m.tokens.get(token.token_id)
        call = m.renew_token if action == "renew" else m.expire_token
        error, expiry = apply(m, call(BOB, created.hmac, period))
        if current is None:
            assert isinstance(error, errors.DelegationTokenNotFoundException)
            continue
        if action == "expire" and period < 0:
            assert error is None and expiry == clock.now and token.token_id not in m.tokens
            continue
        if current.expired(clock.now):
            assert isinstance(error, errors.DelegationTokenExpiredException)
            continue
        assert error is None
        if action == "renew":
            wanted = min(expiry_time, period) if period > 0 else expiry_time
        else:
            wanted = period
        assert expiry == min(current.max_timestamp_ms, clock.now + wanted)
        assert expiry <= token.max_timestamp_ms
        assert m.tokens[token.token_id].expiry_timestamp_ms == expiry
        assert m.tokens[token.token_id].max_timestamp_ms == token.max_timestamp_ms


def test_sweep_removes_only_expired_tokens():
    clock = Clock()
    m = manager(clock)
    short = create(m, max_lifetime=1000).token
    long = create(m).token
    assert m.sweep_expired_tokens() == []
    clock.now += 1001
    assert m.sweep_expired_tokens() == [RemoveDelegationTokenRecord(token_id=short.token_id)]
    for record in m.sweep_expired_tokens():
        m.replay(record)
    assert list(m.tokens) == [long.token_id]


def test_controller_commits_tokens_and_a_snapshot_keeps_them(tmp_path):
    config = {"delegation.token.secret.key": SECRET}

    async def main():
        c = await started(tmp_path, **config)
        created = await c.create_delegation_token(ALICE, None, [BOB], -1)
        gone = await c.create_delegation_token(ALICE, None, [], -1)
        renewed = await c.renew_delegation_token(BOB, created.hmac, 1000)
        expired = await c.expire_delegation_token(ALICE, gone.hmac, -1)
        records = [
            r for r in c.log if isinstance(r, (DelegationTokenRecord, RemoveDelegationTokenRecord))
        ]
        await c.shutdown()
        again = await started(tmp_path, image_records(c.image, 0), **config)
        await again.shutdown()
        return created, renewed, expired, records, c.image, again

    created, renewed, expired, records, image, again = asyncio.run(main())
    assert renewed[0] is None and expired[0] is None
    assert [type(r).__name__ for r in records] == [
        "DelegationTokenRecord",
        "DelegationTokenRecord",
        "DelegationTokenRecord",
        "RemoveDelegationTokenRecord",
    ]
    token = image.delegation_tokens[created.token.token_id]
    assert token.expiry_timestamp_ms == renewed[1]
    assert list(image.delegation_tokens) == [created.token.token_id]
    assert again.image.delegation_tokens == image.delegation_tokens
    # The HMAC index is rebuilt from the secret on replay.
    assert again.delegation_token_control.renew_token(BOB, created.hmac, 5).response[0] is None
