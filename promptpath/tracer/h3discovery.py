"""Does this origin offer HTTP/3, and where? From the trace's Alt-Svc and the DNS HTTPS record.

A browser first reaches an origin over TCP and learns about HTTP/3 from an ``Alt-Svc``
response header, or before connecting from an HTTPS resource record (RFC 9460). This
module reads the first from a finished trace and asks DNS for the second, and returns the
``h3`` object of the JSON report. It never raises: a lookup that fails is reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from promptpath.core.h3 import SKIPPED_BY_RESOLVE, describe_h3
from promptpath.net.altsvc import AltService, AltSvc, HTTPSRecord, https_record, parse_alt_svc
from promptpath.net.dns import is_ip_literal

if TYPE_CHECKING:
    from promptpath.result import TraceResult

#: Longest we wait for the HTTPS record.
HTTPS_RR_TIMEOUT_S = 3.0


def _is_local(host: str) -> bool:
    """Names DNS is never asked about (RFC 6761 localhost) and IP literals."""
    bare = host.lower().rstrip(".")
    return is_ip_literal(bare) or bare == "localhost" or bare.endswith(".localhost")


def _service_json(service: AltService) -> dict[str, Any]:
    return {
        "protocol": service.protocol,
        "authority": service.authority,
        "max_age": service.max_age,
        "persist": service.persist,
    }


def _record_json(record: HTTPSRecord) -> dict[str, Any]:
    return {
        "priority": record.priority,
        "target": record.target,
        "alpn": list(record.alpn),
        "port": record.port,
        "ipv4hint": list(record.ipv4hint),
        "ipv6hint": list(record.ipv6hint),
        "ech": record.ech,
        "ttl": record.ttl,
    }


def h3_from_alt_svc(parsed: AltSvc) -> AltService | None:
    """The h3 alternative, unless the origin cleared its alternatives."""
    return None if parsed.clear else parsed.by_protocol("h3")


def h3_from_records(records: tuple[HTTPSRecord, ...]) -> HTTPSRecord | None:
    """The best ServiceMode record that lists h3 in its alpn."""
    return next((r for r in records if not r.alias and "h3" in r.alpn), None)


def build_h3(
    *,
    origin_host: str,
    origin_port: int,
    alt_svc_values: list[str],
    records: tuple[HTTPSRecord, ...] | None,
    records_error: str | None = None,
) -> dict[str, Any]:
    """The JSON ``h3`` object from what was seen. Pure."""
    parsed = parse_alt_svc(alt_svc_values) if alt_svc_values else None
    by_alt = h3_from_alt_svc(parsed) if parsed is not None else None
    by_rr = h3_from_records(records) if records else None
    body: dict[str, Any] = {
        "advertised_by": None,
        "authority": None,
        "host": None,
        "port": None,
        "max_age": None,
        "persist": None,
    }
    if by_alt is not None:
        body.update(
            advertised_by="alt-svc",
            authority=by_alt.authority,
            host=by_alt.host or origin_host,
            port=by_alt.port,
            max_age=by_alt.max_age,
            persist=by_alt.persist,
        )
    elif by_rr is not None:
        host = origin_host if by_rr.target in (".", "") else by_rr.target.rstrip(".")
        port = by_rr.port or origin_port
        same_host = by_rr.target in (".", "")
        body.update(
            advertised_by="https-rr",
            authority=f":{port}" if same_host else f"{host}:{port}",
            host=host,
            port=port,
            max_age=by_rr.ttl,
        )
    body["alt_svc"] = (
        None
        if parsed is None
        else {
            "raw": alt_svc_values,
            "clear": parsed.clear,
            "alternatives": [_service_json(s) for s in parsed.services],
            "problems": list(parsed.problems),
        }
    )
    body["https_rr"] = (
        None
        if records is None and records_error is None
        else {
            "records": [_record_json(r) for r in records or ()],
            "error": records_error,
        }
    )
    return body


async def discover_h3(
    result: TraceResult, *, dns_lookup: bool = True, timeout: float = HTTPS_RR_TIMEOUT_S
) -> dict[str, Any] | None:
    """The ``h3`` JSON object for a finished trace; None for a cleartext (http://) target.

    ``advertised_by`` is "alt-svc" when a response advertised h3, else "https-rr" when the
    HTTPS record lists h3, else None. DNS is not asked for localhost or an IP literal, nor
    for a name --resolve pins: a pinned name is often internal, and the trace itself kept
    it away from DNS (``https_rr.error`` then says the lookup was skipped).
    """
    opts = result.options
    if opts.target.scheme != "https":
        return None
    values = [v for k, v in result.timeline.response_headers if k.lower() == "alt-svc"]
    records: tuple[HTTPSRecord, ...] | None = None
    error: str | None = None
    asks_dns = dns_lookup and not _is_local(opts.target.host)
    if asks_dns and opts.resolve_override(opts.target.host, opts.target.port) is not None:
        error = SKIPPED_BY_RESOLVE
    elif asks_dns:
        try:
            records = await https_record(
                opts.target.host,
                port=opts.target.port,
                resolver=opts.resolver,
                timeout=min(timeout, opts.timeout),
            )
        except (LookupError, OSError, ValueError) as exc:
            error = str(exc)
    return build_h3(
        origin_host=opts.target.host,
        origin_port=opts.target.port,
        alt_svc_values=values,
        records=records,
        records_error=error,
    )


__all__ = [
    "HTTPS_RR_TIMEOUT_S",
    "SKIPPED_BY_RESOLVE",
    "build_h3",
    "describe_h3",
    "discover_h3",
    "h3_from_alt_svc",
    "h3_from_records",
]
