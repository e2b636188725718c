"""An answer the provider's own content policy stopped: a finish reason, not an error.

Pure: it reads the finish reasons the dialect decoders put on their events
(``finishReason=…`` and ``blockReason=…`` for Gemini and Vertex, ``finish_reason=…`` for
OpenAI chat, Azure and Cohere, ``stop_reason=…`` for Anthropic).

None of the official SDKs raises on these (google-genai 3.6.1, checked on loopback with
SAFETY, RECITATION, PROHIBITED_CONTENT, BLOCKLIST and SPII: it yields the last chunk with
its ``finish_reason`` and returns; openai-python's Stream raises only on an ``error``
object, not on ``finish_reason: content_filter``): the application gets a complete stream
with a cut answer. So it is not an in-band error (exit 7) here either; the report says
who stopped the answer, and why, in every channel.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from promptpath.core.timeline import StreamEvent

__all__ = ["POLICY_REASONS", "PolicyStop", "policy_stop", "said"]

#: Finish (and block) reasons that mean a content policy, not the model, ended the answer.
POLICY_REASONS: frozenset[str] = frozenset(
    {
        # Gemini / Vertex FinishReason (google-genai 3.6.1 types.FinishReason)
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
        # OpenAI chat on Azure (and compatible servers): the content filter stopped it
        "content_filter",
        # Anthropic: the streaming classifiers stopped the answer
        "refusal",
    }
)

_FIELD = re.compile(r"\b(finishReason|blockReason|finish_reason|stop_reason)=([A-Za-z_,]+)")


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyStop:
    reason: str  # as the API spelt it: SAFETY, content_filter, refusal, ...
    field: str  # where it said so: finishReason, blockReason, finish_reason, stop_reason
    tokens_before: int  # content events that had arrived when it stopped

    @property
    def prompt_blocked(self) -> bool:
        """The prompt itself was refused (Gemini's blockReason): no answer at all."""
        return self.field == "blockReason"


def said(stop: PolicyStop) -> str:
    """``answer stopped by the provider's content policy (finishReason SAFETY) after 12
    tokens`` for the verdict line and the terminal."""
    if stop.prompt_blocked:
        return f"prompt blocked by the provider's content policy ({stop.field} {stop.reason})"
    return (
        f"answer stopped by the provider's content policy ({stop.field} {stop.reason})"
        f" after {stop.tokens_before} tokens"
    )


def policy_stop(events: Iterable[StreamEvent]) -> PolicyStop | None:
    """The content-policy stop the stream ended with, if it ended with one."""
    tokens = 0
    for event in events:
        if event.kind == "content":
            tokens += 1
        if event.kind not in ("meta", "end") or not event.text:
            continue
        found = _FIELD.search(event.text)
        if found is None:
            continue
        for reason in found.group(2).split(","):
            # Any blockReason refused the prompt (OTHER included): no answer came.
            if reason in POLICY_REASONS or found.group(1) == "blockReason":
                return PolicyStop(reason=reason, field=found.group(1), tokens_before=tokens)
    return None
