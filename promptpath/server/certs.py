"""A throwaway CA and a leaf certificate for the reference endpoint (``--self-signed``).

``cryptography`` is imported inside the function: importing this module stays cheap.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

DEFAULT_HOSTNAMES: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True, slots=True)
class CertPaths:
    """Where ``make_self_signed`` wrote its files."""

    ca: Path  # the CA certificate clients should trust
    cert: Path  # the leaf certificate the server presents
    key: Path  # the leaf's private key (unencrypted PEM)


#: The shortest life a generated leaf has (a Let's Encrypt certificate's 90 days).
LEAF_MIN_LIFETIME_DAYS = 90


def make_self_signed(
    directory: str | os.PathLike[str],
    *,
    hostnames: Sequence[str] = DEFAULT_HOSTNAMES,
    days: int = 30,
    expired: bool = False,
) -> CertPaths:
    """Create ``ca.pem``, ``cert.pem`` and ``key.pem`` in ``directory``.

    The leaf is valid for ``days`` from now, issued at least ``LEAF_MIN_LIFETIME_DAYS``
    before its not-after (a negative ``days`` puts its not-after in
    the past); ``expired=True`` makes a leaf that expired yesterday, whatever ``days``.
    Names that parse as IP addresses become IP SANs, the rest DNS SANs.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "promptpath"),
            x509.NameAttribute(NameOID.COMMON_NAME, "promptpath test CA"),
        ]
    )
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=365))
        .not_valid_after(now + timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    not_after = now - timedelta(days=1) if expired else now + timedelta(days=days)
    # At least a 90-day life, as a CA issues: --cert-days 20 is a certificate 70 days into
    # its life with 20 left (past its renewal point), not a fresh 20-day one that a
    # short-lived-certificate policy would find on schedule.
    not_before = min(now - timedelta(hours=1), not_after - timedelta(days=LEAF_MIN_LIFETIME_DAYS))

    sans: list[x509.GeneralName] = []
    for name in hostnames:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))

    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf_cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "promptpath"),
                    x509.NameAttribute(
                        NameOID.COMMON_NAME, hostnames[0] if hostnames else "localhost"
                    ),
                ]
            )
        )
        .issuer_name(ca_name)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    paths = CertPaths(ca=out / "ca.pem", cert=out / "cert.pem", key=out / "key.pem")
    paths.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths.cert.write_bytes(leaf_cert.public_bytes(serialization.Encoding.PEM))
    key_pem = leaf_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # The key is a throwaway, but keep it private to its owner anyway.
    fd = os.open(paths.key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key_pem)
    return paths
