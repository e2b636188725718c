"""The ghost-stream verdict, from what the client did and what the canary says it did.

Pure: the probe (``ghost_stream.py``) leaves after ``read`` tokens and asks the reference
endpoint for the tagged request's record; this module turns each pair into evidence and
one finding.

The line between pass and fail: generation must stop within ``PASS_MAX_TOKENS`` tokens of
the client leaving. At the canary's 20 tokens/s that is a quarter of a second, which
covers a hop that notices on its next failed write (nginx with
``proxy_ignore_client_abort on`` costs two tokens more than ``off``, measured) and no
more: a hop that keeps pulling spends the rest of the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from promptpath.core.findings import Finding, Verdict

PROBE = "ghost-stream"
#: Tokens the upstream may still produce after the client left for a ``pass``.
PASS_MAX_TOKENS = 5

Style = Literal["abrupt", "clean", "h2_cancel"]
STYLE_NAMES: dict[Style, str] = {
    "abrupt": "reset",
    "clean": "clean close",
    "h2_cancel": "HTTP/2 stream reset",
}
STYLE_WORDS: dict[Style, str] = {
    "abrupt": "after a TCP reset, as from a closed tab or a killed client",
    "clean": "after a clean close, as from a client that aborts its request",
    "h2_cancel": "after an HTTP/2 RST_STREAM (CANCEL) on a connection kept open, as a browser"
    " aborts a fetch",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class GhostRun:
    """One disconnect and the canary's account of the request it ended."""

    style: Style
    read: int  # content tokens the client read before it left
    left_unix_ns: int  # when it left, on this machine's clock
    planned: int  # tokens the canary was asked for
    rate: float  # their cadence, tokens per second
    record: dict[str, object] | None = None  # the canary's record; None: not found
    problem: str | None = None  # why there is no record (unreachable admin, no tag)
    unavailable: str | None = None  # why this way of leaving could not be tried (no HTTP/2)

    @property
    def generated(self) -> int:
        return _int(self.record, "tokens_generated")

    @property
    def wasted(self) -> int:
        """Tokens the upstream produced that nobody read (never negative: a token the
        client read but did not count yet is not waste)."""
        return max(0, self.generated - self.read)

    def ms_after_leaving(self, key: str) -> float | None:
        """A record's unix stamp, in ms after the client left (same clock when the canary
        runs on this machine; across machines their clock offset adds in)."""
        value = (self.record or {}).get(key)
        return None if not isinstance(value, int) else (value - self.left_unix_ns) / 1e6

    def evidence(self) -> dict[str, object]:
        if self.unavailable is not None:
            return {"style": self.style, "read": self.read, "problem": self.unavailable}
        if self.record is None:
            return {"style": self.style, "read": self.read, "problem": self.problem}
        return {
            "style": self.style,
            "read": self.read,
            "planned": self.planned,
            "generated": self.generated,
            "wasted_tokens": self.wasted,
            "upstream_saw_disconnect": bool(self.record.get("disconnected")),
            "disconnect_seen_ms": _round(self.ms_after_leaving("disconnect_unix_ns")),
            "last_token_ms": _round(self.ms_after_leaving("last_token_unix_ns")),
            "wasted_s": round(self.wasted / self.rate, 2) if self.rate else None,
        }

    @property
    def held(self) -> bool:
        """The whole answer was generated before the client left: a hop held it back
        (a buffering proxy) and leaving mid-stream could not be tried."""
        ended = (self.record or {}).get("ended_unix_ns")
        return (
            isinstance(ended, int)
            and ended <= self.left_unix_ns
            and not (self.record or {}).get("disconnected")
            and self.generated >= self.planned
        )

    @property
    def ghosted(self) -> bool:
        return self.wasted > PASS_MAX_TOKENS


def judge(all_runs: list[GhostRun]) -> Finding:
    """One finding over the disconnect styles tried: the worse one decides. A style the
    path could not offer (no HTTP/2 to reset a stream on) is in the evidence, and named
    in the summary, but judges nothing."""
    evidence: dict[str, object] = {
        "pass_max_tokens": PASS_MAX_TOKENS,
        "runs": [run.evidence() for run in all_runs],
    }
    runs = [run for run in all_runs if run.unavailable is None]
    untried = "".join(
        f"; {STYLE_NAMES[run.style]} not tried: {run.unavailable}"
        for run in all_runs
        if run.unavailable is not None
    )
    missing = [run for run in runs if run.record is None]
    if missing:
        return Finding(
            probe=PROBE,
            verdict=Verdict.SKIP,
            summary=f"cannot see the upstream: {missing[0].problem}",
            evidence=evidence,
            advice=[
                "Give --canary-admin URL (the reference endpoint's own address) when the path"
                " in between does not pass GET /stats/requests/ID, and check that a hop does"
                " not strip the x-promptpath-* request headers."
            ],
        )
    held = [run for run in runs if run.held]
    if held:
        return Finding(
            probe=PROBE,
            verdict=Verdict.SKIP,
            summary=(
                f"could not leave mid-stream: the whole answer ({held[0].planned} tokens) was"
                " generated before the client left, as when a hop holds the stream back"
            ),
            evidence=evidence,
            advice=[
                "Run the buffering probe: a hop that delivers the whole answer at once"
                " hides the stream, and with it whether a disconnect would reach the model."
            ],
        )
    ghosts = [run for run in runs if run.ghosted]
    if ghosts:
        worst = max(ghosts, key=lambda run: run.wasted)
        last_ms = worst.ms_after_leaving("last_token_unix_ns")
        seen = bool((worst.record or {}).get("disconnected"))
        went_on = f" for {last_ms / 1000:.2f} s" if last_ms is not None and last_ms > 0 else ""
        summary = (
            f"the upstream kept generating after the client left ({STYLE_WORDS[worst.style]}):"
            f" {worst.wasted} of {worst.planned} tokens that nobody read{went_on}"
            + ("" if seen else "; it never saw the client leave")
            + untried
        )
        return Finding(
            probe=PROBE,
            verdict=Verdict.FAIL,
            summary=summary,
            evidence=evidence,
            advice=[
                "A hop between the client and the model does not pass a client's disconnect"
                " upstream: it keeps pulling the answer (and paying for its tokens).",
                "In an application gateway, check for the client's disconnect on every chunk"
                " (e.g. Starlette's request.is_disconnected()) and cancel the upstream"
                " request; count disconnects separately from completions.",
                "In nginx, keep proxy_ignore_client_abort off (the default).",
            ],
        )
    worst = max(runs, key=lambda run: run.wasted)
    seen_ms = [
        ms
        for run in runs
        if (ms := run.ms_after_leaving("disconnect_unix_ns")) is not None and ms >= 0
    ]
    noticed = f"; the endpoint saw it leave within {max(seen_ms):.0f} ms" if seen_ms else ""
    styles = " and ".join(STYLE_NAMES[run.style] for run in runs)
    tokens = (
        "no token"
        if worst.wasted == 0
        else f"at most {worst.wasted} token" + ("s" if worst.wasted != 1 else "")
    )
    return Finding(
        probe=PROBE,
        verdict=Verdict.PASS,
        summary=(
            f"the upstream stopped when the client left ({styles}): {tokens} generated"
            f" that nobody read{noticed}{untried}"
        ),
        evidence=evidence,
    )


def _int(record: dict[str, object] | None, key: str) -> int:
    value = (record or {}).get(key)
    return value if isinstance(value, int) else 0


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
