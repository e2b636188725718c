"""Was the certificate we were shown made by a TLS-inspecting hop? A table and two judges.

Pure: issuer names in, evidence out; no socket, no clock. Two kinds of evidence:

* the issuer names a known inspection product (``PRODUCTS``: each pattern is one
  attribute of the issuer's distinguished name and a substring of its value, with where
  the name comes from written beside it);
* the certificate's issuer differs from the one a direct handshake to the same origin
  was shown (``compare_direct``; whoever can make a direct handshake calls it).

Products whose CA the administrator names (so no name can be matched) are left out of
the table on purpose, with the reason: Squid ssl-bump ships no CA — the admin generates
one (wiki.squid-cache.org, ConfigExamples/Intercept/SslBumpExplicit); Palo Alto's
"Forward Trust" certificate, Check Point's HTTPS Inspection CA and Blue Coat/Symantec
ProxySG's issuer keyring are created or imported by the admin too. Those are seen only by
``compare_direct``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from promptpath.core.timeline import CertInfo, Interception, InterceptionEvidence


@dataclass(frozen=True, slots=True, kw_only=True)
class IssuerPattern:
    """An inspection product's CA, recognised by one attribute of the issuer's name."""

    product: str
    attribute: str  # RFC 4514 attribute type: CN, O, OU
    contains: str  # case-insensitive substring of that attribute's value
    source: str

    def describe(self) -> str:
        return f"{self.attribute} contains {self.contains!r}"


# Patterns are per attribute, never a substring of the whole name: Cloudflare's *public*
# CA ("CN=Cloudflare Inc ECC CA-3, O=Cloudflare, Inc.") issues the real certificates of
# many AI APIs, so only the Zero Trust gateway's own CA names may say "Cloudflare".
PRODUCTS: tuple[IssuerPattern, ...] = (
    IssuerPattern(
        product="mitmproxy",
        attribute="O",
        contains="mitmproxy",
        source="mitmproxy certs.py creates its CA as O=mitmproxy, CN=mitmproxy; mitmdump "
        "11.0.2 showed issuer CN=mitmproxy,O=mitmproxy here",
    ),
    IssuerPattern(
        product="Zscaler",
        attribute="O",
        contains="Zscaler",
        source="help.zscaler.com 'Choosing the CA Certificate for SSL Inspection' (issuer "
        "DN set to the Zscaler intermediate); issuer seen in the field: CN=Zscaler "
        "Intermediate Root CA (zscalerthree.net) (t), OU=Zscaler Inc., O=Zscaler Inc.; "
        "the root is CN=Zscaler Root CA, O=Zscaler Inc.",
    ),
    IssuerPattern(
        product="Netskope",
        attribute="CN",
        contains="goskope.com",
        source="docs.netskope.com 'Certificates' (certificates for SSL/TLS decryption); "
        "tenant intermediates seen in the field as CN=ca.<tenant>.goskope.com",
    ),
    IssuerPattern(
        product="Netskope",
        attribute="CN",
        contains="netskope",
        source="as above: the root is CN=caadmin.netskope.com",
    ),
    IssuerPattern(
        product="Cisco Umbrella",
        attribute="CN",
        contains="Cisco Umbrella",
        source="Umbrella docs 'Install the Cisco Umbrella Root Certificate' (Cisco Umbrella "
        "Root CA); issuer seen in the field: CN=Cisco Umbrella Secondary SubCA ams-SG, O=Cisco",
    ),
    IssuerPattern(
        product="Fortinet FortiGate",
        attribute="O",
        contains="Fortinet",
        source="docs.fortinet.com FortiGate 'Certificate inspection': default CA "
        "Fortinet_CA_SSL; Fortinet's built-in CAs carry O=Fortinet, OU=Certificate Authority",
    ),
    IssuerPattern(
        product="Sophos Firewall",
        attribute="O",
        contains="Sophos",
        source="docs.sophos.com Sophos Firewall 'Certificate authorities': built-in signing "
        "CA SecurityAppliance_SSL_CA (its O=Sophos not checked against a live appliance)",
    ),
    IssuerPattern(
        product="Sophos Firewall",
        attribute="CN",
        contains="SecurityAppliance_SSL_CA",
        source="as above",
    ),
    IssuerPattern(
        product="Cloudflare Zero Trust Gateway",
        attribute="CN",
        contains="Gateway CA - Cloudflare Managed",
        source="Cloudflare Zero Trust docs (user-side certificates); seen in the field as "
        "CN=Gateway CA - Cloudflare Managed G1 <account id>",
    ),
    IssuerPattern(
        product="Cloudflare Zero Trust Gateway",
        attribute="OU",
        contains="Gateway Intermediate ECC Certificate Authority",
        source="the legacy chain under CN=Cloudflare for Teams ECC Certificate Authority, "
        "intermediate OU=Gateway Intermediate ECC Certificate Authority",
    ),
    IssuerPattern(
        product="Cloudflare Zero Trust Gateway",
        attribute="CN",
        contains="Cloudflare for Teams",
        source="Cloudflare Zero Trust docs: root CN=Cloudflare for Teams ECC Certificate Authority",
    ),
    IssuerPattern(
        product="Kaspersky",
        attribute="CN",
        contains="Kaspersky Anti-Virus Personal Root",
        source="seen in the field: O=AO Kaspersky Lab, CN=Kaspersky Anti-Virus Personal "
        "Root Certificate",
    ),
    IssuerPattern(
        product="ESET",
        attribute="CN",
        contains="ESET SSL Filter CA",
        source="seen in the field: C=SK, O=ESET, spol. s r. o., CN=ESET SSL Filter CA",
    ),
    IssuerPattern(
        product="Avast",
        attribute="CN",
        contains="Avast Web/Mail Shield",
        source="seen in the field: CN=Avast Web/Mail Shield Root",
    ),
    IssuerPattern(
        product="Burp Suite",
        attribute="CN",
        contains="PortSwigger CA",
        source="Burp's CA: C=PortSwigger, ST=PortSwigger, L=PortSwigger, O=PortSwigger, "
        "OU=PortSwigger CA, CN=PortSwigger CA",
    ),
    IssuerPattern(
        product="Fiddler",
        attribute="CN",
        contains="DO_NOT_TRUST_FiddlerRoot",
        source="Fiddler Classic's root CA: CN=DO_NOT_TRUST_FiddlerRoot",
    ),
    IssuerPattern(
        product="Charles Proxy",
        attribute="CN",
        contains="Charles Proxy CA",
        source="seen in the field: CN=Charles Proxy CA (<date>, <host>), "
        "OU=https://charlesproxy.com/ssl, O=XK72 Ltd",
    ),
)

_HEX = "0123456789abcdefABCDEF"


def dn_attributes(dn: str) -> tuple[tuple[str, str], ...]:
    """``(TYPE, value)`` pairs of an RFC 4514 distinguished name, escapes undone.

    Types are upper-cased; ``,`` and ``+`` (multi-valued RDNs) both separate pairs.
    """
    pairs: list[tuple[str, str]] = []
    key: str | None = None
    text = bytearray()
    i = 0
    while i < len(dn):
        ch = dn[i]
        if ch == "\\" and i + 1 < len(dn):
            nxt = dn[i + 1]
            if nxt in _HEX and i + 2 < len(dn) and dn[i + 2] in _HEX:
                text.append(int(dn[i + 1 : i + 3], 16))  # one byte of a UTF-8 sequence
                i += 3
                continue
            text.extend(nxt.encode())
            i += 2
            continue
        if key is None and ch == "=":
            key = text.decode(errors="replace").strip().upper()
            text.clear()
        elif key is not None and ch in ",+":
            pairs.append((key, text.decode(errors="replace")))
            key = None
            text.clear()
        else:
            text.extend(ch.encode())
        i += 1
    if key is not None:
        pairs.append((key, text.decode(errors="replace")))
    return tuple(pairs)


def name_product(issuer: str) -> tuple[str, InterceptionEvidence] | None:
    """The inspection product ``issuer`` names, with the evidence; None when it names none."""
    values = dn_attributes(issuer)
    for pattern in PRODUCTS:
        needle = pattern.contains.casefold()
        if any(k == pattern.attribute and needle in v.casefold() for k, v in values):
            return pattern.product, InterceptionEvidence(
                kind="issuer_names_product",
                issuer=issuer,
                compared_with=pattern.describe(),
                source=pattern.source,
            )
    return None


def _organisations(dn: str) -> set[str]:
    return {v.strip().casefold() for k, v in dn_attributes(dn) if k == "O"}


def compare_direct(seen: CertInfo, direct: CertInfo) -> InterceptionEvidence | None:
    """Evidence when ``seen`` (through the path under test) was issued by someone other
    than the issuer of ``direct`` (a direct handshake to the same origin); else None.

    Issuers count as the same when their names are equal or, failing that, when both
    name the same organisation (O): a CA operator rotates between sibling intermediates
    (Let's Encrypt R10/R11, Google Trust Services WR1/WE1) and one origin's load-balanced
    nodes can hold certificates from both, while an inspection product puts its own
    name in the issuer (Zscaler's docs: every field is copied "except ... the issuer").
    A rotated certificate from the same CA is not evidence; subject and dates are not
    compared for that reason.
    """
    if seen.issuer == direct.issuer:
        return None
    seen_orgs, direct_orgs = _organisations(seen.issuer), _organisations(direct.issuer)
    if seen_orgs and seen_orgs == direct_orgs:
        return None
    return InterceptionEvidence(
        kind="differs_from_direct", issuer=seen.issuer, compared_with=direct.issuer
    )


def judge(
    seen: CertInfo | None, *, direct: CertInfo | None = None
) -> Interception | Literal[False] | None:
    """``TLSInfo.intercepted`` for the certificate ``seen``: None without a certificate,
    False when neither its issuer nor (given) a direct handshake's certificate says
    interception, else the product (when named) and every piece of evidence."""
    if seen is None:
        return None
    evidence: list[InterceptionEvidence] = []
    named = name_product(seen.issuer)
    if named is not None:
        evidence.append(named[1])
    if direct is not None:
        differs = compare_direct(seen, direct)
        if differs is not None:
            evidence.append(differs)
    if not evidence:
        return False
    return Interception(by=None if named is None else named[0], evidence=tuple(evidence))
