"""Certificates signed by the local cluster's CA, for the node and its clients.

:mod:`mcp_operator.dev.cluster` makes the CA (and the API server's serving
certificate); this module issues what the node adds: the kubelet's client
certificate (``system:node:<name>`` in ``system:nodes``, which the Node
authorizer and NodeRestriction key on), its serving certificate (the bridge
address, which the API server verifies with ``--kubelet-certificate-authority``),
kube-proxy's, and the API server's client certificate for the kubelet API. Keys
are EC P-256, PEM (PKCS#8), unencrypted, mode 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

VALID_DAYS = 30


def issue(
    ca_cert: Path,
    ca_key: Path,
    cert_out: Path,
    key_out: Path,
    *,
    common_name: str,
    organizations: tuple[str, ...] = (),
    client: bool = False,
    server: bool = False,
    dns_names: tuple[str, ...] = (),
    ip_addresses: tuple[str, ...] = (),
) -> None:
    """Write a key and a certificate for ``common_name`` signed by the CA at ``ca_*``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    authority = x509.load_pem_x509_certificate(ca_cert.read_bytes())
    authority_key = serialization.load_pem_private_key(ca_key.read_bytes(), password=None)
    assert isinstance(authority_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    usages += [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(authority.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    names: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
    names += [x509.IPAddress(ipaddress.ip_address(address)) for address in ip_addresses]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    certificate = builder.sign(authority_key, hashes.SHA256())
    cert_out.parent.mkdir(parents=True, exist_ok=True)
    key_out.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_out.chmod(0o600)
    cert_out.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
