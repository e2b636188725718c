"""The ``dns`` object of the JSON report, checked against the report schema."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema

from promptpath.core.timeline import DNSAnswer
from promptpath.report.json import dns_json


def dns_schema() -> dict[str, object]:
    text = resources.files("promptpath.report").joinpath("schema.json").read_text()
    schema = json.loads(text)
    return {"$defs": schema["$defs"], **schema["$defs"]["run"]["properties"]["dns"]}


def test_named_resolver_answer_renders_every_field() -> None:
    answer = DNSAnswer(
        resolver="127.0.0.1:5353",
        addresses=(("127.0.0.2", "ipv4"), ("::1", "ipv6")),
        start_ns=1_000_000,
        end_ns=3_500_000,
        ttl=30,
        cname_chain=("lb.example.com", "edge.example.net"),
    )
    data = dns_json(answer, "127.0.0.2")
    assert data == {
        "resolver": "127.0.0.1:5353",
        "answers": [{"ip": "127.0.0.2", "family": "ipv4"}, {"ip": "::1", "family": "ipv6"}],
        "used": "127.0.0.2",
        "ttl": 30,
        "cname_chain": ["lb.example.com", "edge.example.net"],
        "duration_ms": 2.5,
    }
    jsonschema.validate(data, dns_schema())


def test_system_answer_without_ttl_and_unused_address_validates() -> None:
    answer = DNSAnswer(resolver="system", addresses=(("192.0.2.1", "ipv4"),), start_ns=0, end_ns=0)
    data = dns_json(answer, None)
    assert data is not None
    assert data["ttl"] is None
    assert data["used"] is None
    jsonschema.validate(data, dns_schema())


def test_no_answer_is_null() -> None:
    assert dns_json(None, None) is None
    jsonschema.validate(None, dns_schema())
