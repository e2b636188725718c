"""The canned answer the reference endpoint streams, cut into word tokens."""

from __future__ import annotations

import re
from collections.abc import Iterable

ANSWER = (
    "A BGP session that keeps flapping is usually telling you that keepalives are not "
    'getting through in time. Start with the hold timer: if the peer logs "hold timer '
    'expired", packets are being lost or delayed between the two speakers, often by a '
    "congested link, a policer, or control-plane protection dropping TCP port 179.\n\n"
    "Check the interface counters for input errors and drops, and compare the MTU on both "
    "ends: a mismatch lets the small OPEN and KEEPALIVE messages through but drops full "
    "UPDATE packets, so the session comes up and dies a few minutes later. If the peer "
    'sends a NOTIFICATION with "maximum prefixes exceeded", raise the limit or filter '
    "the routes it announces.\n\n"
    "Enable BFD for faster, cleaner failure detection, and turn on dampening only after "
    "you understand why routes are unstable."
)

_WORD = re.compile(r"\s*\S+")


def words(text: str = ANSWER) -> list[str]:
    """Word tokens, each carrying the whitespace in front of it (as LLM tokens do)."""
    return _WORD.findall(text)


_WORDS = words()


def answer_tokens(count: int) -> list[str]:
    """``count`` tokens of the canned answer, repeated as needed."""
    out: list[str] = []
    while len(out) < count:
        chunk = _WORDS[: count - len(out)]
        if out:  # a repeat starts a new paragraph, not glued to the last word
            chunk = ["\n\n" + chunk[0].lstrip(), *chunk[1:]]
        out.extend(chunk)
    return out


def count_prompt_tokens(strings: Iterable[str]) -> int:
    """A rough, deterministic token estimate (about 4/3 tokens per word)."""
    n_words = sum(len(s.split()) for s in strings)
    return max(1, (n_words * 4 + 2) // 3)
