"""A throwaway certificate authority for TLS tests and benchmarks: a CA, and
server and client certificates it signs, written as PEM (and PKCS12) files.

    ca = TestCA(directory)
    server = ca.issue("localhost", server=True)     # .key_path, .cert_path, .keystore_path
    alice = ca.issue("alice", organizational_unit="eng")
    ca.cert_path                                     # the truststore

Keys are EC P-256 (fast to make); nothing here is a fixed secret: every key
and password is random per instance.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["IssuedCertificate", "TestCA"]


@dataclass
class IssuedCertificate:
    subject: str  # RFC 4514 form, as the broker maps it
    key_pem: bytes
    cert_pem: bytes  # the certificate, then the CA's
    key_path: str
    cert_path: str
    keystore_path: str  # PEM: key + chain in one file (ssl.keystore.type=PEM)
    pkcs12_path: str
    pkcs12_password: str


def _name(
    common_name: str, organizational_unit: str | None = None, organization: str = "kfast test"
) -> x509.Name:
    # Most general first, as CAs issue them: the subject then reads
    # CN=...,OU=...,O=... in RFC 4514/2253 form (Java's getName()).
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)]
    if organizational_unit:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, organizational_unit))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


class TestCA:
    __test__ = False  # not a pytest class

    def __init__(self, directory: str, name: str = "kfast test CA"):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        subject = _name(name)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.cert_pem = self.cert.public_bytes(serialization.Encoding.PEM)
        self.cert_path = self._write("ca.pem", self.cert_pem)

    def _write(self, name: str, data: bytes) -> str:
        path = os.path.join(self.directory, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return path

    def issue(
        self, common_name: str, *, server: bool = False, organizational_unit: str | None = None
    ) -> IssuedCertificate:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        subject = _name(common_name, organizational_unit)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName(common_name),
                        x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    ]
                ),
                critical=False,
            )
            usage = ExtendedKeyUsageOID.SERVER_AUTH
        else:
            usage = ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        cert_pem = cert.public_bytes(serialization.Encoding.PEM) + self.cert_pem
        stem = common_name.replace("/", "_")
        password = secrets.token_urlsafe(12)
        p12 = pkcs12.serialize_key_and_certificates(
            stem.encode(),
            key,
            cert,
            [self.cert],
            serialization.BestAvailableEncryption(password.encode()),
        )
        return IssuedCertificate(
            subject=subject.rfc4514_string(),
            key_pem=key_pem,
            cert_pem=cert_pem,
            key_path=self._write(f"{stem}.key", key_pem),
            cert_path=self._write(f"{stem}.crt", cert_pem),
            keystore_path=self._write(f"{stem}-keystore.pem", key_pem + cert_pem),
            pkcs12_path=self._write(f"{stem}.p12", p12),
            pkcs12_password=password,
        )
