"""Client certificates for tests: a CA of their own, or the control plane's, issuing pairs.

Used by the exec plugin of ``tests/support/exec_cert_plugin.py`` and by unit tests of
the TLS transport. Keys are EC P-256, PEM (PKCS#8), unencrypted.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Authority:
    certificate_pem: str
    key_pem: str


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def new_authority(name: str = "test-ca") -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Authority(certificate.public_bytes(serialization.Encoding.PEM).decode(), _pem_key(key))


def issue(
    authority: Authority,
    common_name: str,
    *,
    groups: tuple[str, ...] = (),
    not_before: datetime.datetime,
    not_after: datetime.datetime,
    server_names: tuple[str, ...] = (),
) -> tuple[str, str]:
    """A certificate for ``common_name`` (the user, to the API server) in ``groups`` (its
    organisations), signed by ``authority``: ``(certificate_pem, key_pem)``. With
    ``server_names`` (DNS names or IP addresses), a serving certificate for them instead."""
    import ipaddress

    ca_certificate = x509.load_pem_x509_certificate(authority.certificate_pem.encode())
    ca_key = serialization.load_pem_private_key(authority.key_pem.encode(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    names += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(names))
        .issuer_name(ca_certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
    )
    if not server_names:
        usage = ExtendedKeyUsageOID.CLIENT_AUTH
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH
        alternative: list[x509.GeneralName] = []
        for name in server_names:
            try:
                alternative.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                alternative.append(x509.DNSName(name))
        builder = builder.add_extension(x509.SubjectAlternativeName(alternative), critical=False)
    certificate = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False).sign(
        ca_key, hashes.SHA256()
    )
    return certificate.public_bytes(serialization.Encoding.PEM).decode(), _pem_key(key)
