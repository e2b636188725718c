"""The edge named over real sockets: the reference endpoint plays each CDN's documented
edge headers (the ``cdn`` control, server/cdnplay.py, written from the providers' examples
rather than from the reader), and the run names the edge in ``server.edge_name`` and on the
SERVER line; a CDN that names no location, and an unknown header set, leave it unnamed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promptpath.server.cdnplay import AKAMAI_HOST
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer

pytestmark = pytest.mark.integration

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())


def _run(server: RefServer, cdn: str) -> tuple[dict[str, Any], str]:
    assert server.ca is not None
    res = run_cli(
        "run",
        server.path("/v1/chat/completions"),
        "--json",
        "--timeout",
        "10",
        "--cacert",
        server.ca,
        "-H",
        "x-promptpath-rate: 0",
        "-H",
        f"x-promptpath-cdn: {cdn}",
    )
    assert res.exit_code == 0, res.stderr
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    server_line = [ln for ln in res.stderr.splitlines() if ln.startswith(("SERVER", "       "))]
    return body, "\n".join(server_line)


@pytest.mark.parametrize(
    ("cdn", "name", "header"),
    [
        ("cloudflare:AMS", "AMS", "cf-ray"),
        ("cloudfront:NRT", "NRT", "x-amz-cf-pop"),
        ("fastly:LHR", "LHR", "x-served-by"),  # the delivery node, not the shield (IAD)
        ("azure-front-door:SIN", "SIN", "x-azure-ref"),
        ("akamai", AKAMAI_HOST, "x-cache"),
        ("fly:ORD", "ORD", "fly-request-id"),
        ("vercel:CDG", "cdg1", "x-vercel-id"),
    ],
)
def test_each_cdn_edge_is_named_from_its_documented_header(
    refserver_tls: RefServer, cdn: str, name: str, header: str
) -> None:
    body, shown = _run(refserver_tls, cdn)
    named = body["server"]["edge_name"]
    assert named is not None
    assert (named["name"], named["cdn"], named["header"]) == (name, cdn.split(":")[0], header)
    assert f"edge {name} ({cdn.split(':')[0]}: {header} " in shown


@pytest.mark.parametrize(
    ("cdn", "words"),
    [
        ("google", "edge not named (google's via names no location)"),
        ("unknown:FRA", "edge not named"),
    ],
)
def test_an_edge_no_header_names_is_not_named(
    refserver_tls: RefServer, cdn: str, words: str
) -> None:
    body, shown = _run(refserver_tls, cdn)
    assert body["server"]["edge_name"] is None
    assert words in shown
    assert "FRA" not in shown.split("edge not named")[1].split("·")[0]  # never a guess
