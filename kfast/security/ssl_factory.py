"""ssl.SSLContext from Kafka's ssl.* settings (Kafka's DefaultSslEngineFactory).

Keystores (the broker's own key and certificate chain):

* ``ssl.keystore.type=PEM``: ``ssl.keystore.location`` is one PEM file with
  the private key and the chain, or the two are inline in
  ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``;
  ``ssl.key.password`` decrypts an encrypted key;
* ``PKCS12`` (and ``JKS`` files that are PKCS12, as keytool writes them since
  Java 9): read with ``cryptography``; ``ssl.keystore.password`` opens it.

Truststores: PEM (file or inline ``ssl.truststore.certificates``) or PKCS12.
OpenSSL loads keys from files only; a key that is not already a PEM file is
written to a private temporary file, encrypted with a one-time password, and
removed once loaded.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from collections.abc import Callable

from kfast.config import ConfigException

__all__ = ["client_ssl_context", "server_ssl_context"]

Setting = Callable[[str], object]  # property name -> its value for this listener

_TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {
    "required": ssl.CERT_REQUIRED,
    "requested": ssl.CERT_OPTIONAL,
    "none": ssl.CERT_NONE,
}
# TLS 1.3 suites: OpenSSL enables all five and Python cannot narrow them.
_TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}


def _secret(value) -> str | None:
    return None if value is None else str(value)


def _read(path: str, name: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ConfigException(name, path, f"cannot read the file: {exc.strerror}") from None


def _pkcs12(data: bytes, password: str | None, name: str, store_type: str):
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_key_and_certificates(
            data, None if password is None else password.encode()
        )
    except ValueError:
        reason = (
            "not a PKCS12 file (kfast reads JKS keystores only when keytool wrote them "
            "as PKCS12; convert with keytool -importkeystore -deststoretype PKCS12)"
            if store_type == "JKS"
            else "not a PKCS12 file, or a wrong password"
        )
        raise ConfigException(name, "[file]", reason) from None


def _load_key_and_chain(
    context: ssl.SSLContext, key_pem: bytes, chain_pem: bytes, key_password: str | None, name: str
) -> None:
    from cryptography.hazmat.primitives import serialization

    try:
        key = serialization.load_pem_private_key(
            key_pem, None if key_password is None else key_password.encode()
        )
    except (ValueError, TypeError) as exc:
        raise ConfigException(name, "[hidden]", f"cannot load the private key: {exc}") from None
    one_time = secrets.token_bytes(32)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(one_time),
    )
    _load_chain_file(context, encrypted + b"\n" + chain_pem, one_time, name)


def _load_chain_file(context: ssl.SSLContext, pem: bytes, password, name: str) -> None:
    fd, path = tempfile.mkstemp(prefix="kfast-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        context.load_cert_chain(path, password=password)
    except ssl.SSLError as exc:
        raise ConfigException(
            name, "[hidden]", f"cannot load the key and certificates: {exc.reason or exc}"
        ) from None
    finally:
        os.unlink(path)


def _load_keystore(context: ssl.SSLContext, setting: Setting) -> bool:
    """The listener's key and chain into ``context``; False if none is set."""
    store_type = str(setting("ssl.keystore.type")).upper()
    location = setting("ssl.keystore.location")
    inline_key = _secret(setting("ssl.keystore.key"))
    inline_chain = _secret(setting("ssl.keystore.certificate.chain"))
    key_password = _secret(setting("ssl.key.password"))
    if inline_key is not None or inline_chain is not None:
        if store_type != "PEM":
            raise ConfigException(
                "ssl.keystore.key", "[hidden]", "inline keys need ssl.keystore.type=PEM"
            )
        if inline_key is None or inline_chain is None or location is not None:
            raise ConfigException(
                "ssl.keystore.key",
                "[hidden]",
                "set both ssl.keystore.key and ssl.keystore.certificate.chain, "
                "and no ssl.keystore.location",
            )
        _load_key_and_chain(
            context, inline_key.encode(), inline_chain.encode(), key_password, "ssl.keystore.key"
        )
        return True
    if location is None:
        return False
    data = _read(str(location), "ssl.keystore.location")
    if store_type == "PEM":
        from cryptography.hazmat.primitives.serialization import Encoding  # noqa: F401

        chain = b"".join(block for block in _pem_blocks(data) if b"CERTIFICATE" in block)
        key = b"".join(block for block in _pem_blocks(data) if b"PRIVATE KEY" in block)
        if not key or not chain:
            raise ConfigException(
                "ssl.keystore.location",
                location,
                "a PEM keystore holds a private key and its certificate chain",
            )
        _load_key_and_chain(context, key, chain, key_password, "ssl.keystore.location")
        return True
    from cryptography.hazmat.primitives import serialization

    key, cert, extra = _pkcs12(
        data, _secret(setting("ssl.keystore.password")), "ssl.keystore.location", store_type
    )
    if key is None or cert is None:
        raise ConfigException(
            "ssl.keystore.location",
            location,
            "the keystore holds no private key with a certificate",
        )
    chain = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [cert, *(extra or [])])
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _load_key_and_chain(context, key_pem, chain, None, "ssl.keystore.location")
    return True


def _pem_blocks(data: bytes) -> list[bytes]:
    blocks: list[bytes] = []
    rest = data
    while True:
        start = rest.find(b"-----BEGIN ")
        if start < 0:
            return blocks
        end_marker = rest.find(b"-----END ", start)
        end = rest.find(b"-----", end_marker + 9) if end_marker >= 0 else -1
        if end < 0:
            return blocks
        blocks.append(rest[start : end + 5] + b"\n")
        rest = rest[end + 5 :]


def _load_truststore(context: ssl.SSLContext, setting: Setting) -> bool:
    store_type = str(setting("ssl.truststore.type")).upper()
    location = setting("ssl.truststore.location")
    inline = _secret(setting("ssl.truststore.certificates"))
    try:
        if inline is not None:
            if store_type != "PEM" or location is not None:
                raise ConfigException(
                    "ssl.truststore.certificates",
                    "[hidden]",
                    "inline certificates need ssl.truststore.type=PEM and no "
                    "ssl.truststore.location",
                )
            context.load_verify_locations(cadata=inline)
            return True
        if location is None:
            return False
        data = _read(str(location), "ssl.truststore.location")
        if store_type == "PEM":
            context.load_verify_locations(cadata=data.decode("ascii", "replace"))
            return True
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        try:
            store = pkcs12.load_pkcs12(
                data,
                None
                if setting("ssl.truststore.password") is None
                else str(setting("ssl.truststore.password")).encode(),
            )
        except ValueError:
            raise ConfigException(
                "ssl.truststore.location", location, "not a PKCS12 truststore, or a wrong password"
            ) from None
        certs = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            certs.append(store.cert.certificate)
        if not certs:
            raise ConfigException("ssl.truststore.location", location, "no certificate in it")
        context.load_verify_locations(
            cadata="".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)
        )
        return True
    except ssl.SSLError as exc:
        raise ConfigException(
            "ssl.truststore",
            "[certificates]",
            f"cannot load the trusted certificates: {exc.reason or exc}",
        ) from None


def _names(setting: Setting, name: str) -> list[str]:
    """A LIST-typed property's value (kfast.config parses it into a list)."""
    value = setting(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigException(name, value, "expected a comma-separated list")
    return [str(v) for v in value]


def _apply_protocols(context: ssl.SSLContext, setting: Setting) -> None:
    enabled = [p for p in _names(setting, "ssl.enabled.protocols") if p in _TLS_VERSIONS]
    if not enabled:
        raise ConfigException(
            "ssl.enabled.protocols",
            setting("ssl.enabled.protocols"),
            "no TLS version kfast supports (TLSv1.2, TLSv1.3)",
        )
    versions = sorted(_TLS_VERSIONS[p] for p in enabled)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    suites = _names(setting, "ssl.cipher.suites")
    if suites:
        tls12 = [_openssl_name(s) for s in suites if s not in _TLS13_SUITES]
        if ssl.TLSVersion.TLSv1_3 in versions and set(suites) & _TLS13_SUITES != _TLS13_SUITES:
            raise ConfigException(
                "ssl.cipher.suites",
                ",".join(suites),
                "kfast cannot narrow the TLSv1.3 suites (OpenSSL through "
                "Python enables all of them); list all three or none",
            )
        if ssl.TLSVersion.TLSv1_2 in versions or tls12:
            try:
                context.set_ciphers(":".join(tls12) if tls12 else "!ALL")
            except ssl.SSLError:
                raise ConfigException(
                    "ssl.cipher.suites", ",".join(suites), "no cipher suite that OpenSSL knows"
                ) from None


def _openssl_name(suite: str) -> str:
    """IANA name of a TLS 1.2 ECDHE/DHE AEAD suite -> OpenSSL's
    (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 -> ECDHE-RSA-AES128-GCM-SHA256);
    an OpenSSL name passes through."""
    if not suite.startswith("TLS_") or "_WITH_" not in suite:
        return suite
    exchange, cipher = suite[4:].split("_WITH_", 1)
    cipher = (
        cipher.replace("AES_128_", "AES128-")
        .replace("AES_256_", "AES256-")
        .replace("CHACHA20_POLY1305_SHA256", "CHACHA20-POLY1305")
        .replace("_", "-")
    )
    return exchange.replace("_", "-") + "-" + cipher


def server_ssl_context(setting: Setting) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _apply_protocols(context, setting)
    if not _load_keystore(context, setting):
        raise ConfigException(
            "ssl.keystore.location",
            None,
            "an SSL listener needs a keystore (ssl.keystore.location, or "
            "ssl.keystore.key and ssl.keystore.certificate.chain)",
        )
    client_auth = str(setting("ssl.client.auth")).lower()
    context.verify_mode = _CLIENT_AUTH[client_auth]
    if not _load_truststore(context, setting) and client_auth != "none":
        raise ConfigException(
            "ssl.client.auth", client_auth, "client authentication needs a truststore"
        )
    return context


def client_ssl_context(setting: Setting) -> ssl.SSLContext:
    """kfast's own client (inter-broker, controller): trusts the truststore
    (the system's CAs without one), presents the keystore when set."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _apply_protocols(context, setting)
    if not _load_truststore(context, setting):
        context.load_default_certs()
    _load_keystore(context, setting)
    algorithm = setting("ssl.endpoint.identification.algorithm")
    context.check_hostname = bool(algorithm) and str(algorithm).lower() == "https"
    return context
