"""Interception judged from issuer names: the product table, the direct comparison, and
how ``tls.intercepted`` reaches the JSON and the terminal."""

from __future__ import annotations

import datetime as dt
import json
from importlib import resources
from typing import Any, Literal

import jsonschema
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from promptpath.core.timeline import CertInfo, Interception, Timeline, TLSInfo
from promptpath.net.interception import (
    PRODUCTS,
    IssuerPattern,
    compare_direct,
    dn_attributes,
    judge,
    name_product,
)
from promptpath.net.tlsinfo import finish_tls
from promptpath.report.json import timeline_json
from promptpath.report.terminal import interception_lines, tls_line

#: One issuer per table entry, as the product writes it (RFC 4514, as cryptography
#: prints it: most specific attribute first). Each must be matched by its own entry.
EXAMPLES: dict[tuple[str, str, str], str] = {
    ("mitmproxy", "O", "mitmproxy"): "O=mitmproxy,CN=mitmproxy",
    ("Zscaler", "O", "Zscaler"): (
        "CN=Zscaler Intermediate Root CA (zscalerthree.net) (t)\\ ,OU=Zscaler Inc.,"
        "O=Zscaler Inc.,ST=California,C=US"
    ),
    ("Netskope", "CN", "goskope.com"): "CN=ca.acme.goskope.com,OU=Cert,O=Acme",
    ("Netskope", "CN", "netskope"): "CN=caadmin.netskope.com,O=Acme,C=US",
    ("Cisco Umbrella", "CN", "Cisco Umbrella"): "O=Cisco,CN=Cisco Umbrella Secondary SubCA ams-SG",
    ("Fortinet FortiGate", "O", "Fortinet"): (
        "1.2.840.113549.1.9.1=support@fortinet.com,CN=FG100FTK19000000,"
        "OU=Certificate Authority,O=Fortinet,L=Sunnyvale,ST=California,C=US"
    ),
    ("Sophos Firewall", "O", "Sophos"): "CN=Sophos_CA_C01234567,OU=NSG,O=Sophos,C=GB",
    ("Sophos Firewall", "CN", "SecurityAppliance_SSL_CA"): "CN=SecurityAppliance_SSL_CA",
    ("Cloudflare Zero Trust Gateway", "CN", "Gateway CA - Cloudflare Managed"): (
        "CN=Gateway CA - Cloudflare Managed G1 d4cab1c0e006138441e1f1b57bfde614"
    ),
    (
        "Cloudflare Zero Trust Gateway",
        "OU",
        "Gateway Intermediate ECC Certificate Authority",
    ): (
        "OU=Gateway Intermediate ECC Certificate Authority,O=Cloudflare\\, Inc.,"
        "L=San Francisco,ST=California,C=US"
    ),
    ("Cloudflare Zero Trust Gateway", "CN", "Cloudflare for Teams"): (
        "CN=Cloudflare for Teams ECC Certificate Authority,O=Cloudflare\\, Inc,C=US"
    ),
    ("Kaspersky", "CN", "Kaspersky Anti-Virus Personal Root"): (
        "CN=Kaspersky Anti-Virus Personal Root Certificate,O=AO Kaspersky Lab"
    ),
    ("ESET", "CN", "ESET SSL Filter CA"): "CN=ESET SSL Filter CA,O=ESET\\, spol. s r. o.,C=SK",
    ("Avast", "CN", "Avast Web/Mail Shield"): "CN=Avast Web/Mail Shield Root,O=Avast",
    ("Burp Suite", "CN", "PortSwigger CA"): (
        "CN=PortSwigger CA,OU=PortSwigger CA,O=PortSwigger,L=PortSwigger,ST=PortSwigger,"
        "C=PortSwigger"
    ),
    ("Fiddler", "CN", "DO_NOT_TRUST_FiddlerRoot"): (
        "CN=DO_NOT_TRUST_FiddlerRoot,O=DO_NOT_TRUST,OU=Created by http://www.fiddler2.com"
    ),
    ("Charles Proxy", "CN", "Charles Proxy CA"): (
        "CN=Charles Proxy CA (26 May 2023\\, laptop),OU=https://charlesproxy.com/ssl,"
        "O=XK72 Ltd,L=Auckland,ST=Auckland,C=NZ"
    ),
}

#: Issuers of real public CAs (and our own test CA): never an interception by name.
PUBLIC = [
    "CN=R11,O=Let's Encrypt,C=US",
    "CN=WE1,O=Google Trust Services,C=US",
    # Cloudflare's public CA issues the real certificates of many AI APIs.
    "CN=Cloudflare Inc ECC CA-3,O=Cloudflare\\, Inc.,C=US",
    "CN=DigiCert Global G2 TLS RSA SHA256 2020 CA1,O=DigiCert Inc,C=US",
    "CN=Amazon RSA 2048 M02,O=Amazon,C=US",
    "CN=Sectigo RSA Domain Validation Secure Server CA,O=Sectigo Limited,L=Salford,C=GB",
    "CN=Microsoft Azure RSA TLS Issuing CA 03,O=Microsoft Corporation,C=US",
    "CN=promptpath test CA,O=promptpath",
]


def _key(pattern: IssuerPattern) -> tuple[str, str, str]:
    return (pattern.product, pattern.attribute, pattern.contains)


def test_every_table_entry_has_an_example_here() -> None:
    assert sorted(map(_key, PRODUCTS)) == sorted(EXAMPLES)
    assert all(p.source for p in PRODUCTS)


@pytest.mark.parametrize("pattern", PRODUCTS, ids=lambda p: f"{p.product}:{p.contains}")
def test_each_table_entry_names_its_product_from_a_real_issuer(pattern: IssuerPattern) -> None:
    issuer = EXAMPLES[_key(pattern)]
    named = name_product(issuer)
    assert named is not None
    product, evidence = named
    assert product == pattern.product
    assert evidence.kind == "issuer_names_product" and evidence.issuer == issuer
    assert evidence.compared_with == pattern.describe()
    assert evidence.source == pattern.source


@pytest.mark.parametrize("issuer", PUBLIC)
def test_public_cas_are_not_named_as_inspection(issuer: str) -> None:
    assert name_product(issuer) is None


def test_a_product_name_in_another_attribute_is_not_matched() -> None:
    # The table says which attribute: "mitmproxy" in a CN, "Sophos" as a locality are not O.
    assert name_product("CN=mitmproxy.example,O=Let's Encrypt,L=Sophos") is None


def test_matching_ignores_case() -> None:
    named = name_product("CN=ZSCALER ROOT CA,O=ZSCALER INC.")
    assert named is not None and named[0] == "Zscaler"


@pytest.mark.parametrize(
    ("dn", "pairs"),
    [
        ("CN=a,O=b", (("CN", "a"), ("O", "b"))),
        ("O=ESET\\, spol. s r. o.,C=SK", (("O", "ESET, spol. s r. o."), ("C", "SK"))),
        ("CN=x+UID=7,o=y", (("CN", "x"), ("UID", "7"), ("O", "y"))),
        ("CN=caf\\C3\\A9", (("CN", "café"),)),
        ("CN=\\#not-hex\\ ", (("CN", "#not-hex "),)),
        ("CN=a\\=b", (("CN", "a=b"),)),
        ("", ()),
    ],
)
def test_distinguished_names_are_split_with_escapes_undone(
    dn: str, pairs: tuple[tuple[str, str], ...]
) -> None:
    assert dn_attributes(dn) == pairs


def cert(issuer: str, subject: str = "CN=api.test") -> CertInfo:
    return CertInfo(
        subject=subject,
        issuer=issuer,
        sans=("api.test",),
        not_before="2026-01-01T00:00:00+00:00",
        not_after="2027-01-01T00:00:00+00:00",
        days_left=30,
    )


LE_R10 = "CN=R10,O=Let's Encrypt,C=US"
LE_R11 = "CN=R11,O=Let's Encrypt,C=US"


def test_the_same_issuer_as_a_direct_handshake_is_no_evidence() -> None:
    assert compare_direct(cert(LE_R11), cert(LE_R11)) is None


def test_a_sibling_intermediate_of_the_same_ca_is_no_evidence() -> None:
    # Let's Encrypt issues from R10 and R11 alike; two nodes of one origin may differ.
    assert compare_direct(cert(LE_R10), cert(LE_R11)) is None


def test_another_organisation_than_the_direct_handshake_saw_is_evidence() -> None:
    seen = cert("CN=Corp Inspection CA,O=Example Corp")
    evidence = compare_direct(seen, cert(LE_R11))
    assert evidence is not None
    assert evidence.kind == "differs_from_direct"
    assert evidence.issuer == seen.issuer and evidence.compared_with == LE_R11
    assert evidence.source is None


def test_issuers_without_an_organisation_are_compared_whole() -> None:
    assert compare_direct(cert("CN=proxy-ca"), cert("CN=origin-ca")) is not None
    assert compare_direct(cert("CN=proxy-ca"), cert(LE_R11)) is not None


def test_judge_without_a_certificate_is_not_judged() -> None:
    assert judge(None) is None


def test_judge_of_a_public_certificate_is_false() -> None:
    assert judge(cert(LE_R11)) is False
    assert judge(cert(LE_R11), direct=cert(LE_R10)) is False


def test_judge_names_the_product_and_keeps_both_kinds_of_evidence() -> None:
    seen = cert("O=mitmproxy,CN=mitmproxy")
    verdict = judge(seen, direct=cert(LE_R11))
    assert isinstance(verdict, Interception) and verdict.by == "mitmproxy"
    kinds = [e.kind for e in verdict.evidence]
    assert kinds == ["issuer_names_product", "differs_from_direct"]


def test_judge_from_the_direct_comparison_alone_names_no_product() -> None:
    verdict = judge(cert("CN=Squid CA,O=Example Corp"), direct=cert(LE_R11))
    assert isinstance(verdict, Interception) and verdict.by is None
    assert [e.kind for e in verdict.evidence] == ["differs_from_direct"]


def der_issued_by(issuer_cn: str, issuer_o: str) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    issuer = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, issuer_cn),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, issuer_o),
        ]
    )
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "api.test")]))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.DER)


def test_finish_tls_judges_the_certificate_it_parses() -> None:
    tls = TLSInfo(sni="api.test", alpn_offered=(), cert_der=der_issued_by("mitmproxy", "mitmproxy"))
    finish_tls(tls)
    assert isinstance(tls.intercepted, Interception) and tls.intercepted.by == "mitmproxy"


def test_finish_tls_keeps_a_judgement_made_with_a_direct_handshake() -> None:
    direct = judge(cert("CN=x,O=Corp"), direct=cert(LE_R11))
    tls = TLSInfo(
        sni="api.test", alpn_offered=(), cert_der=der_issued_by("x", "Corp"), intercepted=direct
    )
    finish_tls(tls)
    assert tls.intercepted is direct


def test_finish_tls_without_a_certificate_leaves_it_unjudged() -> None:
    tls = TLSInfo(sni="api.test", alpn_offered=())
    finish_tls(tls)
    assert tls.intercepted is None


def tls_schema() -> dict[str, Any]:
    schema = json.loads(resources.files("promptpath.report").joinpath("schema.json").read_text())
    return {"$defs": schema["$defs"], **schema["$defs"]["run"]["properties"]["tls"]}


def timeline_with(intercepted: Interception | Literal[False] | None) -> Timeline:
    timeline = Timeline(t0_ns=0, t0_unix_ns=0)
    timeline.tls = TLSInfo(
        sni="api.test",
        alpn_offered=("h2",),
        alpn="h2",
        version="TLSv1.3",
        cipher="TLS_AES_128_GCM_SHA256",
        verified=True,
        cert=cert("O=mitmproxy,CN=mitmproxy"),
        intercepted=intercepted,
    )
    return timeline


@pytest.mark.parametrize("state", [None, False])
def test_an_unjudged_or_clean_tls_intercepted_is_null_or_false_in_json(
    state: Literal[False] | None,
) -> None:
    body = timeline_json(timeline_with(state))["tls"]
    jsonschema.validate(body, tls_schema())
    assert body["intercepted"] is state


def test_a_named_interception_in_json_matches_the_schema() -> None:
    body = timeline_json(timeline_with(judge(cert("O=mitmproxy,CN=mitmproxy"))))["tls"]
    jsonschema.validate(body, tls_schema())
    assert body["intercepted"]["by"] == "mitmproxy"
    [evidence] = body["intercepted"]["evidence"]
    assert evidence["compared_with"] == "O contains 'mitmproxy'"


def test_the_schema_refuses_true_for_intercepted() -> None:
    body = timeline_json(timeline_with(False))["tls"]
    body["intercepted"] = True
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(body, tls_schema())


def test_the_tls_line_says_who_intercepted_and_why() -> None:
    timeline = timeline_with(judge(cert("O=mitmproxy,CN=mitmproxy")))
    line = tls_line(timeline)
    assert line is not None and line.endswith("verified · INTERCEPTED by mitmproxy")
    why, advice = interception_lines(timeline)
    assert why == "issuer O=mitmproxy,CN=mitmproxy (O contains 'mitmproxy')"
    assert "usual cause of both buffering" in advice and "certificate failures" in advice


def test_an_interception_seen_only_by_comparison_names_the_direct_issuer() -> None:
    timeline = timeline_with(judge(cert("CN=Corp CA,O=Corp"), direct=cert(LE_R11)))
    line = tls_line(timeline)
    assert line is not None and "INTERCEPTED by an inspecting hop" in line
    assert interception_lines(timeline)[0] == (
        f"issuer CN=Corp CA,O=Corp, a direct handshake was shown {LE_R11}"
    )


def test_no_interception_adds_nothing_to_the_terminal() -> None:
    timeline = timeline_with(False)
    line = tls_line(timeline)
    assert line is not None and "INTERCEPTED" not in line
    assert interception_lines(timeline) == []
