"""Idle-timeout verdict: from the probe's observations to a Finding. Pure: no clock, no I/O.

The observations (``measure``): the keep-alive watch (``IdleWatch``) and, in canary
mode, one or two paused streams (``PauseRun``). A cut of the first pause gives the hop's
idle threshold; the same pause with SSE keepalive comments tells an idle timeout (the
stream survives) from an absolute limit (it dies at the same elapsed time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from promptpath.core.findings import Finding, Verdict
from promptpath.probes.idle_timeout.measure import SOCKET_RESOLUTION_S, IdleWatch, PauseRun

PROBE = "idle-timeout"
SAME_CUT_S = 1.0  # two cuts this close (or within 10 %) are the same limit

_SEVERITY = {
    Verdict.SKIP: 0,
    Verdict.PASS: 1,
    Verdict.WARN: 2,
    Verdict.FAIL: 3,
    Verdict.ERROR: 4,
}


# -- verdict parts ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class _Part:
    verdict: Verdict
    summary: str
    advice: tuple[str, ...] = ()


_CUT_WORDS: dict[str, str] = {
    "gateway_status": "a gateway error before the response headers",
    "fin": "FIN mid-body, no chunked terminator",
    "rst": "RST mid-body",
    "clean_end": "a clean end of body without the terminal marker",
    "h2_reset": "the HTTP/2 stream or connection closed mid-body",
    "h3_reset": "the HTTP/3 stream was reset or the QUIC connection closed mid-body",
    "stalled": "nothing: the stream stalled and never ended",
}


def _same_cut(a: float, b: float) -> bool:
    return abs(a - b) <= max(SAME_CUT_S, 0.1 * max(a, b))


def _timeout_settings(hops: Sequence[str]) -> str:
    named = {
        "nginx": "nginx `proxy_read_timeout`",
        "caddy": "caddy reverse_proxy `transport http { read_timeout }`",
        "haproxy": "haproxy `timeout server` (and `timeout tunnel`)",
        "envoy": "envoy route `idle_timeout`/`timeout`",
        "aws-elb": "the AWS load balancer's idle timeout",
        "cloudflare": "Cloudflare's 100 s proxy read timeout (Enterprise: configurable)",
    }
    picked = [text for hop, text in named.items() if hop in hops]
    if not picked:
        picked = [
            "nginx `proxy_read_timeout`",
            "haproxy `timeout server`",
            "caddy `read_timeout`",
            "the cloud load balancer's idle timeout",
        ]
    return ", ".join(picked)


def mid_stream_part(
    first: PauseRun | None,
    second: PauseRun | None,
    hops: Sequence[str],
    no_comments: str | None = None,
) -> tuple[_Part | None, dict[str, object]]:
    """Verdict and headline numbers of the mid-stream pause measurement; ``no_comments``
    names a framing with no comment to send (the keepalive re-test was not run)."""
    facts: dict[str, object] = {
        "threshold_s": None,
        "resolution_s": None,
        "cut_by": None,
        "keepalive_helps": None,
    }
    if first is None:
        return None, facts
    if first.outcome is None:
        return _Part(
            verdict=Verdict.ERROR,
            summary=f"the paused stream failed: {first.error or 'unknown error'}",
        ), facts
    if first.outcome == "survived":
        return _Part(
            verdict=Verdict.PASS,
            summary=f"a stream silent for {first.pause_s:g} s survived (no idle cut up to the cap)",
        ), facts
    if first.outcome == "stalled":
        facts["cut_by"] = "stalled"
        return _Part(
            verdict=Verdict.FAIL,
            summary=f"a stream silent for {first.pause_s:g} s never resumed nor ended: a hop"
            " stopped forwarding without closing",
            advice=("look for a middlebox dropping the flow's state (NAT, firewall idle timers)",),
        ), facts
    threshold = first.silence_s
    facts.update(threshold_s=threshold, resolution_s=first.resolution_s, cut_by=first.outcome)
    how = _CUT_WORDS.get(first.outcome, first.outcome)
    lost = first.pause_after - first.tokens_before_cut
    if lost > 0:
        facts["tokens_lost"] = lost
        how += f"; {lost} of the {first.pause_after} tokens sent before the pause never arrived"
    at = f"{threshold:.1f} ± {first.resolution_s:.2f} s" if threshold is not None else "?"
    settings = _timeout_settings(hops)
    if second is None and no_comments is not None:
        return _Part(
            verdict=Verdict.FAIL,
            summary=f"the path cuts a stream silent for {at} ({how}); {no_comments}, so no"
            " keepalive can cover a silence: only the hop's timeout decides",
            advice=(f"raise the hop's idle timeout above your longest silence: {settings}",),
        ), facts
    if second is None or second.outcome is None:
        detail = f" ({second.error})" if second is not None and second.error else ""
        return _Part(
            verdict=Verdict.FAIL,
            summary=f"the path cuts a stream silent for {at} ({how}); the keepalive"
            f" re-test did not complete{detail}",
            advice=(f"raise the hop's idle timeout above your longest silence: {settings}",),
        ), facts
    if second.outcome == "survived":
        facts["keepalive_helps"] = True
        every = max(0.1, round((threshold or 2.0) / 2, 1))
        return _Part(
            verdict=Verdict.FAIL,
            summary=f"the path cuts a stream silent for {at} ({how}); SSE keepalive comments"
            f" every {second.keepalive_s:g} s kept the same {second.pause_s:g} s pause alive:"
            " an idle timeout",
            advice=(
                f"have the server send SSE comments (`: keepalive`) at least every {every:g} s"
                " while the model thinks, or",
                f"raise the hop's idle timeout above your longest silence: {settings}",
            ),
        ), facts
    facts["keepalive_helps"] = False
    a, b = first.since_pause_s, second.since_pause_s
    if a is not None and b is not None and _same_cut(a, b):
        facts["absolute_limit_s"] = second.elapsed_s
        return _Part(
            verdict=Verdict.FAIL,
            summary=f"the path cuts the stream {second.elapsed_s:.1f} s after the request"
            f" whether or not keepalives flow ({how}): an absolute limit on the response,"
            " not an idle timeout",
            advice=(
                "keepalives cannot help: raise the hop's total response/request timeout"
                f" ({settings}), or keep answers shorter than the limit",
            ),
        ), facts
    got = "?" if b is None else f"{b:.1f} s"
    return _Part(
        verdict=Verdict.FAIL,
        summary=f"the path cuts a stream silent for {at} ({how}); with keepalive comments"
        f" every {second.keepalive_s:g} s it was still cut, after {got}",
        advice=(
            "a hop ignores SSE comments as activity or enforces another limit; raise its"
            f" timeouts: {settings}",
        ),
    ), facts


def keepalive_part(watch: IdleWatch | None) -> tuple[_Part | None, dict[str, object]]:
    """Verdict and evidence of the keep-alive idle watch."""
    if watch is None:
        return None, {}
    ev: dict[str, object] = {
        k: v for k, v in asdict(watch).items() if k not in ("response_end_ns", "closed_ns")
    }
    ev["threshold_s"] = watch.threshold_s
    ev["closed_by"] = watch.close_kind
    ev["resolution_s"] = SOCKET_RESOLUTION_S
    if watch.error is not None:
        return _Part(
            verdict=Verdict.ERROR,
            summary=f"the keep-alive watch could not start: {watch.error}",
        ), ev
    if watch.connection_close:
        return _Part(
            verdict=Verdict.PASS,
            summary="the peer closes the connection after each response (Connection: close):"
            " nothing idles",
        ), ev
    t = watch.threshold_s
    if t is not None:
        who = {
            "fin": "FIN",
            "rst": "RST",
            "close_notify": "TLS close_notify",
        }.get(watch.close_kind or "", "?")
        said = f" after sending {watch.bytes_while_idle} bytes" if watch.bytes_while_idle else ""
        expiry = f"keep the client pool's idle expiry below {t:.1f} s (httpx `keepalive_expiry`)"
        if watch.close_kind == "rst":
            return _Part(
                verdict=Verdict.WARN,
                summary=f"idle keep-alive connections are reset (RST) after {t:.1f} s{said}:"
                " a client reusing one then sees ECONNRESET",
                advice=(expiry,),
            ), ev
        return _Part(
            verdict=Verdict.PASS,
            summary=f"idle keep-alive connections are closed by the peer after {t:.1f} s"
            f" ({who}{said})",
            advice=(expiry,) if t < 30 else (),
        ), ev
    if watch.reuse == "ok":
        return _Part(
            verdict=Verdict.PASS,
            summary=f"a keep-alive connection idle for {watch.cap_s:g} s stayed open and still"
            f" answered (HTTP {watch.reuse_status})",
        ), ev
    if watch.reuse in ("reset", "closed", "timeout"):
        what = {
            "reset": "was reset when reused",
            "closed": "closed as soon as it was reused",
            "timeout": "swallowed the request without an answer",
        }[watch.reuse]
        return _Part(
            verdict=Verdict.FAIL,
            summary=f"a keep-alive connection idle for {watch.cap_s:g} s showed no close, yet"
            f" {what}: a middlebox dropped it silently",
            advice=(
                f"keep the client pool's idle expiry well below {watch.cap_s:g} s, or enable"
                " TCP keepalive below the middlebox's idle timer (NAT, firewall, LB)",
            ),
        ), ev
    return _Part(
        verdict=Verdict.ERROR,
        summary=f"the keep-alive re-use check failed: {watch.reuse_detail or 'unknown'}",
    ), ev


def judge(
    *,
    canary: bool,
    watch: IdleWatch | None,
    first: PauseRun | None = None,
    second: PauseRun | None = None,
    hops: Sequence[str] = (),
    context: dict[str, object] | None = None,
    no_comments: str | None = None,
) -> Finding:
    """The idle-timeout finding: the worst of the keep-alive and mid-stream parts."""
    mid, facts = mid_stream_part(first, second, hops, no_comments)
    keep, keep_ev = keepalive_part(watch)
    runs = [asdict(r) for r in (first, second) if r is not None]
    evidence: dict[str, object] = {
        "mode": "canary" if canary else "blind",
        **facts,
        "mid_stream": {"runs": runs} if canary else None,
        "keepalive_idle": keep_ev or None,
        "hops": list(hops),
        **(context or {}),
    }
    parts = [p for p in (mid, keep) if p is not None]
    if not parts:
        return Finding(
            probe=PROBE,
            verdict=Verdict.SKIP,
            summary="nothing was measured",
            evidence=evidence,
        )
    verdict = max((p.verdict for p in parts), key=lambda v: _SEVERITY[v])
    summary = "; ".join(p.summary for p in parts)
    if not canary:
        summary += " (mid-stream pauses need --canary with promptpath serve as the target)"
    advice = [a for p in parts for a in p.advice]
    return Finding(probe=PROBE, verdict=verdict, summary=summary, evidence=evidence, advice=advice)
