"""The local cluster's certificates: its CA, and what that CA signs.

- :func:`write_cluster_certificates`: the CA, the API server's serving certificate and the
  service-account signing key, for :mod:`mcp_operator.dev.cluster`;
- :func:`issue`: what the node adds: the kubelet's client certificate
  (``system:node:<name>`` in ``system:nodes``, which the Node authorizer and NodeRestriction
  key on), its serving certificate (the bridge address, which the API server verifies with
  ``--kubelet-certificate-authority``), kube-proxy's, and the API server's client certificate
  for the kubelet API.

Keys are EC P-256, PEM (PKCS#8), unencrypted, mode 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from mcp_operator.dev.node_config import NODE_IP

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


@dataclass
class ClusterCertificates:
    """Where :func:`write_cluster_certificates` put each file."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path


def write_cluster_certificates(directory: Path) -> ClusterCertificates:
    """The cluster's CA, the API server's serving certificate and the service-account
    signing key, written into ``directory`` (private keys mode 0600)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(hours=1), now + datetime.timedelta(days=VALID_DAYS))

    def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcp-operator-dev-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    serving_key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes"),
        x509.DNSName("kubernetes.default"),
        x509.DNSName("kubernetes.default.svc"),
        x509.DNSName("kubernetes.default.svc.cluster.local"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("10.96.0.1")),
        # The node's bridge address, where the API server listens when a node runs.
        x509.IPAddress(ipaddress.ip_address(NODE_IP)),
    ]
    serving_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(serving_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    sa_key = ec.generate_private_key(ec.SECP256R1())

    paths = ClusterCertificates(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
    )
    paths.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    # Kept so that tests can issue client certificates the API server accepts (--client-ca-file).
    paths.ca_key.write_bytes(pem_key(ca_key))
    paths.serving_cert.write_bytes(serving_cert.public_bytes(serialization.Encoding.PEM))
    paths.serving_key.write_bytes(pem_key(serving_key))
    paths.sa_key.write_bytes(pem_key(sa_key))
    paths.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    for secret_file in (paths.ca_key, paths.serving_key, paths.sa_key):
        secret_file.chmod(0o600)
    return paths
