"""--path-names, the pure parts: PTR answers read (through RFC 2317 CNAMEs), names beside the
hops in the finding, and hostile names printed as text (escaped, never markup)."""

from __future__ import annotations

import io

import dns.message
import dns.rrset
from rich.console import Console

from promptpath.core.findings import Verdict
from promptpath.net.dnsmsg import read_ptr
from promptpath.probes.path.hops import Sample
from promptpath.probes.path.verdict import judge
from promptpath.report.pathrows import hop_rows
from promptpath.report.pathtable import path_table
from promptpath.report.sanitise import sanitised
from promptpath.report.terminal import print_trimmed

DEST = "192.0.2.9"


def test_a_ptr_is_read_through_a_classless_delegation_cname() -> None:
    qname = "9.2.0.192.in-addr.arpa."
    reply = dns.message.make_response(dns.message.make_query(qname, "PTR"))
    reply.answer.append(
        dns.rrset.from_text(qname, 60, "IN", "CNAME", "9.0-25.2.0.192.in-addr.arpa.")
    )
    reply.answer.append(
        dns.rrset.from_text("9.0-25.2.0.192.in-addr.arpa.", 60, "IN", "PTR", "edge.example.")
    )
    assert read_ptr(reply, qname) == ("edge.example",)
    empty = dns.message.make_response(dns.message.make_query(qname, "PTR"))
    assert read_ptr(empty, qname) == ()


def _samples() -> list[Sample]:
    hop1 = [Sample(ttl=1, kind="time_exceeded", responder="10.0.0.1", rtt_ms=1.0)] * 3
    hop2 = [Sample(ttl=2, kind="synack", responder=DEST, rtt_ms=11.0)] * 3
    return [*hop1, *hop2]


def test_names_sit_beside_their_hops_and_in_the_summary() -> None:
    names = {"10.0.0.1": "r1.lab.test", DEST: None}
    finding = judge(
        destination=DEST,
        port=443,
        tcp=_samples(),
        udp=None,
        connect_ms=None,
        elapsed_s=0.1,
        names=names,
    )
    assert finding.verdict is Verdict.PASS
    hops = finding.evidence["hops"]
    assert isinstance(hops, list)
    assert [h["names"] for h in hops] == [["r1.lab.test"], [None]]
    assert "at hop 2 (192.0.2.9)" in finding.summary or "and hop 2 (192.0.2.9)" in finding.summary
    assert "hop 1 (r1.lab.test (10.0.0.1))" in finding.summary
    assert [r.address for r in hop_rows(finding.evidence)] == [
        "r1.lab.test (10.0.0.1)",
        "192.0.2.9",
    ]
    # Not asked: no names key at all (the JSON of a run without --path-names is unchanged).
    plain = judge(
        destination=DEST, port=443, tcp=_samples(), udp=None, connect_ms=None, elapsed_s=0.1
    )
    assert all("names" not in h for h in plain.evidence["hops"])  # type: ignore[union-attr]


def test_a_hostile_name_prints_escaped_and_is_never_read_as_markup() -> None:
    # A name from getnameinfo or any resolver is text: ESC and newlines are spelt out, and a
    # "[/x]" (which rich's markup parser would refuse with an exception) prints as it is.
    names = {"10.0.0.1": "r1\x1b[31m.new\nline[/x][bold]", DEST: "dest.lab.test"}
    finding = judge(
        destination=DEST,
        port=443,
        tcp=_samples(),
        udp=None,
        connect_ms=None,
        elapsed_s=0.1,
        names=names,
    )
    table = path_table(finding)
    assert table is not None
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None, force_terminal=False)
    with sanitised(console, None):
        print_trimmed(console, table)
    text = out.getvalue()
    assert "\x1b" not in text
    assert "r1\\x1b[31m.new\\nline[/x][bold] (10.0.0.1)" in text
    assert "dest.lab.test (192.0.2.9)" in text
