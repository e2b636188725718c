"""Every name the OTLP export uses, in both settings of the GenAI conventions: one table.

The GenAI semantic conventions moved to their own repository
(open-telemetry/semantic-conventions-genai, status Development) and renamed the client
metrics there. Their transition rule (``docs/gen-ai/gen-ai-spans.md``, the IMPORTANT
note): an instrumentation keeps emitting the names it emitted by default, and emits the
latest ones instead when ``OTEL_SEMCONV_STABILITY_OPT_IN`` (a comma-separated list)
contains ``gen_ai_latest_experimental``. No ``gen_ai/dup``-style value is defined (unlike
``http/dup``): one set of names or the other, never both.

- ``default``: semantic-conventions v1.41.0's names (``docs/gen-ai/gen-ai-metrics.md``):
  ``gen_ai.client.operation.duration``, ``…operation.time_to_first_chunk``,
  ``…operation.time_per_output_chunk`` and the ``gen_ai.client.token.usage`` histogram with
  ``gen_ai.token.type``.
- ``latest``: semantic-conventions-genai's, read at commit 024a4f94 of
  ``docs/gen-ai/client-inference.md``, 066d4a7f of ``docs/gen-ai/gen-ai-token-metrics.md``
  and ``model/gen-ai/token-metrics.yaml``, and 32c328e8 of
  ``docs/gen-ai/non-normative/migration.md`` (the repository had no tagged release in
  the copy read; migration.md says "v1.41.0 … to TODO (latest)"): the span
  ``gen_ai.client.inference`` (a span *type*, not visible over OTLP: its name and
  attributes are the same), ``gen_ai.client.inference.duration`` /
  ``…time_to_first_chunk`` / ``…time_per_output_chunk`` (PR #521), and the token counters
  ``gen_ai.client.inference.usage.{input,output}_tokens``,
  ``…usage.cache_read.input_tokens``, ``…usage.cache_write.input_tokens``,
  ``…usage.reasoning.output_tokens`` with ``gen_ai.token.modality``, beside the
  per-operation histograms ``gen_ai.client.inference.operation.{input,output}_tokens``
  (PR #374).

Pure and cheap: no opentelemetry import (outputs/otlp_sdk.py builds the instruments).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

Semconv = Literal["default", "latest"]
SEMCONVS: Final[tuple[Semconv, ...]] = ("default", "latest")
#: The variable and the value of the conventions' transition rule.
OPT_IN_VARIABLE: Final = "OTEL_SEMCONV_STABILITY_OPT_IN"
OPT_IN_LATEST: Final = "gen_ai_latest_experimental"

#: The ExplicitBucketBoundaries of every client duration (s), the same in both versions.
DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
#: The ExplicitBucketBoundaries of gen_ai.client.token.usage (v1.41) and of the
#: gen_ai.client.inference.operation.*_tokens histograms (latest).
TOKEN_BUCKETS: Final = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip
#: Ours for the network stages: a loopback DNS answer takes 0.1 ms, a TLS handshake over an
#: ocean 300 ms; the GenAI buckets start at 10 ms and would put every set-up stage in one.
STAGE_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip

Kind = Literal["histogram", "counter"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Instrument:
    """One instrument: its name, kind, unit, description and (histograms) bucket boundaries."""

    name: str
    unit: str
    description: str
    buckets: tuple[float, ...] = ()
    kind: Kind = "histogram"


def _seconds(name: str, description: str) -> Instrument:
    return Instrument(name=name, unit="s", description=description, buckets=DURATION_BUCKETS)


def _counter(name: str, description: str) -> Instrument:
    return Instrument(name=name, unit="{token}", description=description, kind="counter")


def _tokens(name: str, description: str) -> Instrument:
    return Instrument(name=name, unit="{token}", description=description, buckets=TOKEN_BUCKETS)


STAGE_DURATION: Final = Instrument(
    name="promptpath.stage.duration",
    unit="s",
    description="Duration of each stage of a traced prompt (promptpath.stage: dns, connect, tls,"
    " quic_handshake, proxy stages, request, wait, first_token, streaming).",
    buckets=STAGE_BUCKETS,
)

_TTFC = "Time to receive the first chunk, from when the client issues the request."
_TPOC = "Time per output chunk, recorded for each chunk after the first one."

#: Role -> instrument, per setting. A role missing from a setting is not emitted in it.
INSTRUMENTS: Final[Mapping[Semconv, Mapping[str, Instrument]]] = {
    "default": {
        "duration": _seconds("gen_ai.client.operation.duration", "GenAI operation duration."),
        "time_to_first_chunk": _seconds("gen_ai.client.operation.time_to_first_chunk", _TTFC),
        "time_per_output_chunk": _seconds("gen_ai.client.operation.time_per_output_chunk", _TPOC),
        "token_usage": _tokens(
            "gen_ai.client.token.usage", "Number of input and output tokens used."
        ),
        "stage": STAGE_DURATION,
    },
    "latest": {
        "duration": _seconds(
            "gen_ai.client.inference.duration", "GenAI client inference operation duration."
        ),
        "time_to_first_chunk": _seconds("gen_ai.client.inference.time_to_first_chunk", _TTFC),
        "time_per_output_chunk": _seconds("gen_ai.client.inference.time_per_output_chunk", _TPOC),
        "usage.input": _counter(
            "gen_ai.client.inference.usage.input_tokens",
            "The number of input (prompt) tokens used, including cached tokens.",
        ),
        "usage.output": _counter(
            "gen_ai.client.inference.usage.output_tokens",
            "The number of output (completion) tokens used, including reasoning tokens.",
        ),
        "usage.cache_read": _counter(
            "gen_ai.client.inference.usage.cache_read.input_tokens",
            "The number of input tokens served from a provider-managed cache.",
        ),
        "usage.cache_write": _counter(
            "gen_ai.client.inference.usage.cache_write.input_tokens",
            "The number of input tokens written to a provider-managed cache.",
        ),
        "usage.reasoning": _counter(
            "gen_ai.client.inference.usage.reasoning.output_tokens",
            "The number of output tokens used for reasoning.",
        ),
        "operation.input": _tokens(
            "gen_ai.client.inference.operation.input_tokens",
            "The number of input (prompt) tokens used per inference operation.",
        ),
        "operation.output": _tokens(
            "gen_ai.client.inference.operation.output_tokens",
            "The number of output (completion) tokens used per inference operation.",
        ),
        "stage": STAGE_DURATION,
    },
}

#: The root span's own attributes, per setting (the shared ones: both). The latest
#: conventions renamed gen_ai.usage.cache_creation.input_tokens to …cache_write… (PR #440)
#: and added …reasoning.output_tokens; the default setting adds nothing new to its span.
SPAN_ATTRIBUTES: Final[Mapping[Semconv, tuple[str, ...]]] = {
    "default": (),
    "latest": (
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_write.input_tokens",
        "gen_ai.usage.reasoning.output_tokens",
    ),
}
#: The attribute the token metrics are broken down by, per setting.
TOKEN_TYPE: Final = "gen_ai.token.type"  # default: input | output
TOKEN_MODALITY: Final = "gen_ai.token.modality"  # latest: unknown (none of ours says)
#: No dialect of ours breaks its usage down by modality: the conventions' answer for that.
MODALITY_UNKNOWN: Final = "unknown"


def semconv_from(environ: Mapping[str, str]) -> Semconv:
    """``latest`` when OTEL_SEMCONV_STABILITY_OPT_IN lists gen_ai_latest_experimental."""
    values = environ.get(OPT_IN_VARIABLE, "").split(",")
    return "latest" if OPT_IN_LATEST in (v.strip() for v in values) else "default"


def instruments(semconv: Semconv) -> tuple[Instrument, ...]:
    """Every instrument the setting may emit, in the table's order."""
    return tuple(INSTRUMENTS[semconv].values())


__all__ = [
    "DURATION_BUCKETS",
    "INSTRUMENTS",
    "MODALITY_UNKNOWN",
    "OPT_IN_LATEST",
    "OPT_IN_VARIABLE",
    "SEMCONVS",
    "SPAN_ATTRIBUTES",
    "STAGE_BUCKETS",
    "STAGE_DURATION",
    "TOKEN_BUCKETS",
    "TOKEN_MODALITY",
    "TOKEN_TYPE",
    "Instrument",
    "Semconv",
    "instruments",
    "semconv_from",
]
