"""--har: the run as a HAR 1.2 log (http://www.softwareishard.com/blog/har-12-spec/).

A pure renderer over the JSON report (a single-run object or a ``promptpath.series/1``
object): one entry per request, the warm request included. HAR's ``timings`` are
consecutive phases; our stages map onto them, and what HAR has no field for (tokens,
gaps, the stream's end) goes under ``_promptpath``, the spec's way to add fields.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from promptpath import __version__
from promptpath.report.runs import runs_of

#: Stages HAR counts as "connect": the spec puts the TLS handshake inside it, and a
#: proxy's own connection and CONNECT tunnel are part of getting connected too.
_CONNECT_STAGES = ("proxy_connect", "proxy_tls", "tunnel", "connect", "tls", "quic_handshake")
_SSL_STAGES = ("tls", "quic_handshake")  # QUIC folds TLS into its handshake
_DNS_STAGES = ("proxy_dns", "dns")


def _sum(stages: Mapping[str, float], names: tuple[str, ...]) -> float:
    """Total of the named stages that happened, -1 (HAR's "does not apply") if none did."""
    found = [stages[n] for n in names if n in stages]
    return round(sum(found), 3) if found else -1


def timings(request: Mapping[str, Any]) -> dict[str, float]:
    """HAR ``timings`` in ms; send, wait and receive are required, so 0 when not reached."""
    stages: Mapping[str, float] = request.get("stages_ms") or {}
    milestones: Mapping[str, float] = request.get("milestones_ms") or {}
    ttfb, end = milestones.get("ttfb"), milestones.get("end")
    if ttfb is not None and end is not None:
        receive = round(end - ttfb, 3)
    else:
        receive = round(stages.get("first_token", 0.0) + stages.get("streaming", 0.0), 3)
    return {
        # Load mode's wait for a free connection is what HAR calls blocked.
        "blocked": stages.get("queue", -1),
        "dns": _sum(stages, _DNS_STAGES),
        "connect": _sum(stages, _CONNECT_STAGES),
        "ssl": _sum(stages, _SSL_STAGES),
        "send": stages.get("request", 0.0),
        "wait": stages.get("wait", 0.0),
        "receive": max(receive, 0.0),
    }


def _total(t: Mapping[str, float]) -> float:
    # ssl is already inside connect: counting it again would double the handshake.
    return round(sum(v for k, v in t.items() if k != "ssl" and v > 0), 3)


def _headers(pairs: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": str(v)} for k, v in pairs.items()]


def _request_headers(run: Mapping[str, Any]) -> list[dict[str, str]]:
    """The request headers the report carries (its ``client`` block; keys never are)."""
    client = run.get("client") or {}
    target = run.get("target") or {}
    known = {
        "Host": target.get("host"),
        "User-Agent": client.get("user_agent"),
        "Accept": client.get("accept"),
        "Accept-Encoding": client.get("accept_encoding"),
        "Content-Type": "application/json",
    }
    return _headers({k: v for k, v in known.items() if v is not None})


def _entry(run: Mapping[str, Any], request: Mapping[str, Any], *, index: int) -> dict[str, Any]:
    url = str((run.get("target") or {}).get("url", ""))
    t = timings(request)
    status = request.get("status")
    version = request.get("http_version") or ""
    response_headers: Mapping[str, str] = request.get("response_headers") or {}
    stream = request.get("stream") or {}
    entry: dict[str, Any] = {
        "startedDateTime": request.get("started_at") or run.get("started_at") or "",
        "time": _total(t),
        "request": {
            "method": "POST",
            "url": url,
            "httpVersion": version,
            "cookies": [],
            "headers": _request_headers(run),
            "queryString": [
                {"name": k, "value": v}
                for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)
            ],
            "headersSize": -1,
            "bodySize": -1,
        },
        "response": {
            # 0: no response at all, as browsers write a request that failed.
            "status": status if isinstance(status, int) else 0,
            "statusText": "",
            "httpVersion": version,
            "cookies": [],
            "headers": _headers(response_headers),
            "content": {
                "size": int(stream.get("bytes") or 0),
                "mimeType": response_headers.get("content-type", ""),
            },
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": -1,
        },
        "cache": {},
        "timings": t,
        "_promptpath": {
            "run": index,
            "reused_connection": request.get("reused_connection"),
            "ttft_ms": request.get("ttft_ms"),
            "first_output_ms": request.get("first_output_ms"),
            "stages_ms": request.get("stages_ms"),
            "milestones_ms": request.get("milestones_ms"),
            "tokens": request.get("tokens"),
            "stream": stream,
            "error": request.get("error"),
        },
    }
    address = request.get("address")
    if address:
        entry["serverIPAddress"] = address.get("ip")
    if status is None and request.get("error"):
        entry["response"]["_error"] = request["error"].get("message")
    return entry


def _entries(report: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for index, run in enumerate(runs_of(report)):
        yield _entry(run, run, index=index)
        if run.get("warm"):
            yield _entry(run, run["warm"], index=index)


def render(report: Mapping[str, Any]) -> dict[str, Any]:
    """The HAR log of ``report`` (write it with json.dumps)."""
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "promptpath", "version": __version__},
            "entries": list(_entries(report)),
        }
    }
