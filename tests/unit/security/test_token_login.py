"""Which delegation tokens a SASL listener lets log in (tokenauth=true):
the committed ones of the node's image, while neither their expiry nor
their max timestamp has passed, and only with delegation.token.secret.key."""

import time

from kfast.config import KafkaConfig
from kfast.controller.metadata.image import MetadataImage
from kfast.security.delegation_token import TokenInformation, token_scram_credential
from kfast.security.listener import ListenerSecurity
from kfast.security.principal import KafkaPrincipal
from kfast.server.sasl_authenticator import SaslListenerHandler

ALICE = KafkaPrincipal("User", "alice")


def _token(token_id: str, expiry_ms: int, max_ms: int) -> TokenInformation:
    return TokenInformation(token_id, ALICE, ALICE, (), 0, max_ms, expiry_ms)


class _Broker:
    def __init__(self, secret: str | None, tokens: dict[str, TokenInformation]) -> None:
        self.config = KafkaConfig({"delegation.token.secret.key": secret} if secret else {})
        self.metadata_image = MetadataImage(cluster_id="c", delegation_tokens=tokens)


def _handler(broker) -> SaslListenerHandler:
    security = ListenerSecurity.from_config(
        KafkaConfig({"sasl.enabled.mechanisms": "SCRAM-SHA-512"}), "SASL", "SASL_PLAINTEXT"
    )
    return SaslListenerHandler(None, "SASL", security, broker, 0)  # type: ignore[arg-type]


def test_only_live_committed_tokens_log_in():
    now = int(time.time() * 1000)
    hour = 3600 * 1000
    tokens = {
        "live": _token("live", now + hour, now + 2 * hour),
        "expired": _token("expired", now - 1, now + hour),
        "past-max": _token("past-max", now + hour, now - 1),
    }
    handler = _handler(_Broker("secret", tokens))
    found = handler._token_credential("SCRAM-SHA-512", "live")
    assert found == (token_scram_credential("secret", "live", "SCRAM-SHA-512"), "alice", now + hour)
    assert found[0].iterations == 4096  # the mechanism's minimum, as Kafka's
    for token_id in ("expired", "past-max", "unknown"):
        assert handler._token_credential("SCRAM-SHA-512", token_id) is None
    assert _handler(_Broker(None, tokens))._token_credential("SCRAM-SHA-512", "live") is None
