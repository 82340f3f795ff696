"""Delegation tokens (KIP-48, KIP-900) with the Java Admin client against a
kfast broker with a SASL_PLAINTEXT SCRAM-SHA-512 listener: create,
describe, renew (by a renewer), refusals (another user, an unknown HMAC, a
non-User renewer, a token for someone else without CREATE_TOKENS, a
describe by someone neither owner nor renewer under an authorizer without
ACLs), expire; with DESCRIBE_TOKENS on User:alice a third user describes
alice's tokens, with CREATE_TOKENS on User:bob creates one owned by bob (v3);
a restart keeps the tokens (metadata records). Token requests over PLAINTEXT
are refused, and without delegation.token.secret.key the feature is off.
The Java program is tests/java (ClientCheck's delegation-tokens and
describe-tokens scenarios)."""

from __future__ import annotations

import asyncio
import base64
import secrets

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from e2e_support import wait_until
from security_support import RawConnection
from test_java_client import _write_client_properties, run_client_check

from kfast.protocol import (
    CreateAclsRequest,
    CreateDelegationTokenRequest,
    DescribeDelegationTokenRequest,
    errors,
)
from kfast.protocol.constants import (
    ACL_OPERATION_CREATE_TOKENS,
    ACL_OPERATION_DESCRIBE_TOKENS,
    ACL_PERMISSION_ALLOW,
    ACL_RESOURCE_USER,
    PATTERN_TYPE_LITERAL,
)
from kfast.security.delegation_token import token_hmac
from kfast.testing import KfastBroker

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

SECRET = "kfast-delegation-token-test-secret"


def _props(secret: str | None = SECRET) -> dict:
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "num.partitions": 1,
        # No ACLs: only owners and renewers see or renew a token; the
        # PLAINTEXT listener (User:ANONYMOUS) manages the SCRAM users.
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    if secret is not None:
        props["delegation.token.secret.key"] = secret
    return props


def _add_users(broker, password: str, *users: str) -> None:
    admin = AdminClient(
        {"bootstrap.servers": f"127.0.0.1:{broker.broker.bound_ports['PLAINTEXT']}"}
    )
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, password.encode()) for user in users]
    )
    for future in futures.values():
        future.result(timeout=30)


def _login(tmp_path, user: str, password: str) -> str:
    return _write_client_properties(
        tmp_path / f"{user}.properties",
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            f'required username="{user}" password="{password}";',
        },
    )


def test_java_admin_creates_describes_renews_expires_and_restart_keeps(
    tmp_path, topic, monkeypatch
):
    password = secrets.token_urlsafe(12)
    monkeypatch.setenv("KFAST_SCRAM_PASSWORD", password)
    data_dir = str(tmp_path / "data")
    alice = _login(tmp_path, "alice", password)
    with KfastBroker(_props(), data_dir=data_dir) as broker:
        _add_users(broker, password, "alice", "bob", "carol")
        sasl = f"127.0.0.1:{broker.broker.bound_ports['SASL_PLAINTEXT']}"
        facts = run_client_check(
            broker, "delegation-tokens", topic, bootstrap=sasl, client_properties=alice
        )
        assert facts["owner"] == "User:alice"
        assert facts["requester"] == "User:alice"
        assert facts["renewers"] == "[User:bob]"
        # The request's max lifetime (2 d, under the 7 d default), the 1 d expiry.
        assert facts["max_minus_issue"] == str(2 * 24 * 3600 * 1000)
        assert facts["expiry_minus_issue"] == str(24 * 3600 * 1000)
        token_id = facts["token_id"]
        hmac_b64 = base64.b64encode(token_hmac(SECRET, token_id)).decode()
        assert facts["hmac"] == hmac_b64  # HmacSHA512(secret, token id), as Kafka's
        assert facts.all("described") == [f"{token_id} User:alice {hmac_b64}"]
        assert facts["described_by_carol"] == "0"  # neither owner, renewer nor authorized
        assert facts["described_for_bob"] == "1"  # owners filter matches renewers too
        assert facts["renewed_minus_issue_le_day"] == "true"
        assert facts["renewed_is_described"] == "true"
        assert facts["carol_renews"] == "DelegationTokenOwnerMismatchException"
        assert facts["unknown_hmac"] == "DelegationTokenNotFoundException"
        assert facts["group_renewer"] == "InvalidPrincipalTypeException"
        assert facts["for_other_owner"] == "DelegationTokenAuthorizationException"
        kept = facts["kept"]
        assert facts["expired_le_now"] == "true"
        assert facts["after_expire"] == kept
        assert facts["renew_expired"] == "DelegationTokenNotFoundException"
        assert set(broker.broker.metadata_image.delegation_tokens) == {kept}

        # PLAINTEXT: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (Kafka's allowTokenRequests).
        raw = RawConnection(broker.broker.bound_ports["PLAINTEXT"])
        try:
            # carol may describe alice's tokens and create tokens owned by bob.
            granted = raw.request(
                "CreateAcls",
                3,
                creations=[
                    CreateAclsRequest.AclCreation(
                        resource_type=ACL_RESOURCE_USER,
                        resource_name=f"User:{user}",
                        resource_pattern_type=PATTERN_TYPE_LITERAL,
                        principal="User:carol",
                        host="*",
                        operation=operation,
                        permission_type=ACL_PERMISSION_ALLOW,
                    )
                    for user, operation in (
                        ("alice", ACL_OPERATION_DESCRIBE_TOKENS),
                        ("bob", ACL_OPERATION_CREATE_TOKENS),
                    )
                ],
            )
            assert [r.error_code for r in granted.results] == [0, 0]
            carol = _scram("carol", password)
            port = broker.broker.bound_ports["SASL_PLAINTEXT"]
            described, for_bob = asyncio.run(
                _ask(
                    port,
                    carol,
                    DescribeDelegationTokenRequest(owners=None),
                    CreateDelegationTokenRequest(
                        owner_principal_type="User",
                        owner_principal_name="bob",
                        renewers=[],
                        max_lifetime_ms=-1,
                    ),
                )
            )
            assert [t.token_id for t in described.tokens] == [kept]
            assert for_bob.error_code == 0
            assert (for_bob.principal_name, for_bob.token_requester_principal_name) == (
                "bob",
                "carol",
            )
            kept_tokens = {kept, for_bob.token_id}
            created = raw.request("CreateDelegationToken", 3, renewers=[], max_lifetime_ms=-1)
            described = raw.request("DescribeDelegationToken", 3, owners=None)
        finally:
            raw.close()
        assert created.error_code == errors.UnsupportedByAuthenticationException.code
        assert (created.principal_name, created.token_id) == ("ANONYMOUS", "")
        assert described.error_code == errors.UnsupportedByAuthenticationException.code

    with KfastBroker(_props(), data_dir=data_dir) as broker:
        sasl = f"127.0.0.1:{broker.broker.bound_ports['SASL_PLAINTEXT']}"
        facts = run_client_check(
            broker, "describe-tokens", topic, bootstrap=sasl, client_properties=alice
        )
        assert sorted(facts.all("described")) == [f"{kept} User:alice"]
        assert set(broker.broker.metadata_image.delegation_tokens) == kept_tokens


def test_java_producer_logs_in_with_a_token(tmp_path, topic):
    """Stage 2 of KIP-48: SCRAM with tokenauth=true, username = token id,
    password = base64(HMAC); the session is token-authenticated (no token
    requests) and an expired token no longer logs in."""
    password = secrets.token_urlsafe(12)
    props = _props()
    del props["authorizer.class.name"], props["super.users"]
    with KfastBroker(props, data_dir=str(tmp_path / "data")) as broker:
        _add_users(broker, password, "alice")
        sasl = f"127.0.0.1:{broker.broker.bound_ports['SASL_PLAINTEXT']}"
        facts = run_client_check(
            broker,
            "token-login",
            topic,
            bootstrap=sasl,
            client_properties=_login(tmp_path, "alice", password),
        )
    assert facts["token_produced"] == "0"
    assert facts["token_session_creates"] == "UnsupportedByAuthenticationException"
    assert facts["token_session_describes"] == "UnsupportedByAuthenticationException"
    assert facts["after_expire"] == "SaslAuthenticationException"


async def _ask(port: int, security, *requests):
    """Each request's response over one SASL connection (kfast's client)."""
    from kfast.client.connection import BrokerConnection

    connection = await BrokerConnection.open("127.0.0.1", port, security=security)
    try:
        return [await connection.send(request) for request in requests]
    finally:
        await connection.close()


def _scram(user: str, password: str):
    from kfast.client.security import ClientSecurity

    return ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-512", user, password)


def test_without_secret_tokens_are_disabled(tmp_path):
    password = secrets.token_urlsafe(12)
    with KfastBroker(_props(secret=None), data_dir=str(tmp_path / "data")) as broker:
        _add_users(broker, password, "alice")
        created, described = asyncio.run(
            _ask(
                broker.broker.bound_ports["SASL_PLAINTEXT"],
                _scram("alice", password),
                CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=-1),
                DescribeDelegationTokenRequest(owners=None),
            )
        )
    assert created.error_code == errors.DelegationTokenDisabledException.code
    assert (created.principal_name, created.token_requester_principal_name) == ("alice", "alice")
    assert described.error_code == errors.DelegationTokenDisabledException.code


def test_the_controller_removes_expired_tokens(tmp_path):
    """delegation.token.expiry.check.interval.ms: the active controller's
    sweep removes a token past its max timestamp from every image."""
    password = secrets.token_urlsafe(12)
    props = {**_props(), "delegation.token.expiry.check.interval.ms": 100}
    with KfastBroker(props, data_dir=str(tmp_path / "data")) as broker:
        _add_users(broker, password, "alice")
        (created,) = asyncio.run(
            _ask(
                broker.broker.bound_ports["SASL_PLAINTEXT"],
                _scram("alice", password),
                CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=300),
            )
        )
        assert created.error_code == 0
        assert created.max_timestamp_ms - created.issue_timestamp_ms == 300
        # Committed before the answer; gone once the sweep after 300 ms ran.
        wait_until(
            lambda: not broker.broker.metadata_image.delegation_tokens,
            message="the expired token's removal",
        )


def test_a_brokers_token_writes_go_to_the_active_controller(tmp_path):
    """A broker-only node checks the client's channel, then forwards Create,
    Renew and Expire to the active controller (an Envelope with the
    client's principal); the token reaches the broker's image, from which
    it describes it and lets the token log in."""
    from confluent_kafka.admin import AdminClient

    from kfast.client.security import ClientSecurity
    from kfast.protocol import ExpireDelegationTokenRequest, RenewDelegationTokenRequest
    from kfast.testing.cluster import KfastCluster
    from kfast.testing.ports import free_port

    password = secrets.token_urlsafe(12)
    sasl_port = free_port()
    cluster = KfastCluster(
        controllers=1,
        brokers=1,
        overrides={"delegation.token.secret.key": SECRET},
        base_dir=str(tmp_path / "cluster"),
    )
    # The broker's client listener port is the cluster's choice: its config
    # is rewritten with a SASL listener beside it before the nodes start.
    cluster.node_overrides[2] = {
        "listeners": f"PLAINTEXT://127.0.0.1:{cluster.nodes[2].broker_port},"
        f"SASL://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
        "SASL:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    cluster._write_config(cluster.nodes[2])
    with cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        for future in admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("alice", info, password.encode())]
        ).values():
            future.result(timeout=30)

        def ask(security, *requests):
            return asyncio.run(_ask(sasl_port, security, *requests))

        alice = _scram("alice", password)
        # The user reaches the broker's image with the metadata log.
        created = wait_until(
            lambda: _try(ask, alice, CreateDelegationTokenRequest(renewers=[], max_lifetime_ms=-1)),
            timeout=30,
            message="alice's login on the broker",
        )[0]
        assert created.error_code == 0, created
        assert created.hmac == token_hmac(SECRET, created.token_id)
        (described,) = wait_until(
            lambda: [
                d for d in ask(alice, DescribeDelegationTokenRequest(owners=None)) if d.tokens
            ],
            timeout=30,
            message="the token in the broker's image",
        )
        assert [t.token_id for t in described.tokens] == [created.token_id]
        (renewed,) = ask(
            alice, RenewDelegationTokenRequest(hmac=created.hmac, renew_period_ms=60_000)
        )
        assert renewed.error_code == 0
        assert renewed.expiry_timestamp_ms <= created.issue_timestamp_ms + 24 * 3600 * 1000

        token = ClientSecurity(
            "SASL_PLAINTEXT",
            None,
            "SCRAM-SHA-512",
            created.token_id,
            base64.b64encode(created.hmac).decode(),
        )
        # kfast's client sends no tokenauth extension: the token id is no user.
        assert _try(ask, token, DescribeDelegationTokenRequest(owners=None)) is None

        (expired,) = ask(
            alice, ExpireDelegationTokenRequest(hmac=created.hmac, expiry_time_period_ms=-1)
        )
        assert expired.error_code == 0
        wait_until(
            lambda: not ask(alice, DescribeDelegationTokenRequest(owners=None))[0].tokens,
            timeout=30,
            message="the token's removal from the broker's image",
        )


def _try(ask, security, *requests):
    """The responses, or None when the login fails."""
    try:
        return ask(security, *requests)
    except errors.SaslAuthenticationException:
        return None
