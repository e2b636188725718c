"""The HTTP/3 client certificate, read once before t0: any PEM layout curl accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trustme
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from promptpath.net.quic_connect import load_client_cert


def _public(key: Any) -> bytes:
    return bytes(key.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo))


@pytest.mark.parametrize("layout", ["separate", "key-first", "cert-first"])
def test_the_leaf_its_chain_and_its_key_load_from_any_layout(tmp_path: Path, layout: str) -> None:
    leaf = trustme.CA().create_child_ca().issue_cert("alice@example.com")
    cert_pem = b"".join(p.bytes() for p in leaf.cert_chain_pems)  # leaf, then intermediate
    key_pem = leaf.private_key_pem.bytes()
    certfile, keyfile = tmp_path / "client.pem", None
    if layout == "separate":
        certfile.write_bytes(cert_pem)
        keyfile = tmp_path / "client.key"
        keyfile.write_bytes(key_pem)
    else:
        certfile.write_bytes(key_pem + cert_pem if layout == "key-first" else cert_pem + key_pem)
    loaded = load_client_cert(str(certfile), None if keyfile is None else str(keyfile))
    assert loaded.certificate.public_bytes(Encoding.PEM) == leaf.cert_chain_pems[0].bytes()
    assert [c.public_bytes(Encoding.PEM) for c in loaded.chain] == [
        leaf.cert_chain_pems[1].bytes()  # the intermediate travels with the leaf
    ]
    assert _public(loaded.private_key) == _public(loaded.certificate)
