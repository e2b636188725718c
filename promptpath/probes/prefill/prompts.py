"""The prefill probe's prompts: one question, a fixed prefix, neutral filler of a size.

Every prompt starts with the same short instruction (the fixed prefix), then a line that
is new for every request (so that no request of the fit finds its filler in a prefix
cache: caches match from the first token on, and the fixed prefix is shorter than any
provider caches), then neutral filler to the size asked, then the question. Sizes are
input tokens estimated at 4/3 per word (what the reference endpoint counts; English text
runs 1.3-1.4 tokens per word in the common tokenisers): the usage the API reports is
what the fit uses when it has one.

Where the API caches only a prefix the request marks (Anthropic's ``cache_control``,
Converse's ``cachePoint``), the mark goes after the filler, before the question
(``cache_prefix``): what it marks holds the fresh line, so each request of the fit marks a
prefix no other request shares (a write, never a read), and the repeats of the longest
prompt, byte for byte, find theirs.
"""

from __future__ import annotations

import secrets

__all__ = ["PREFIX", "QUESTION", "cache_prefix", "estimate_tokens", "prompt_of"]

PREFIX = "Read the reference notes below, then answer the question after them in one line."
QUESTION = "Question: what colour is the sky on a clear day?"
#: Neutral filler: plain sentences about nothing the question asks.
_FILLER_TEXT = (
    "The archive holds routine notes on weather, tides and the timetable of the harbour"
    " ferry, kept in the order they were written and read by no one in particular."
)
_FILLER = _FILLER_TEXT.split(" ")


def estimate_tokens(text: str) -> int:
    """Input tokens estimated from words (4/3 per word), as the reference endpoint counts."""
    return max(1, (len(text.split()) * 4 + 2) // 3)


def prompt_of(tokens: int, nonce: str | None = None) -> str:
    """A prompt of about ``tokens`` input tokens: prefix, a fresh line, filler, question."""
    tag = nonce if nonce is not None else secrets.token_hex(6)
    head = f"{PREFIX}\nNote set {tag}.\n"
    tail = f"\n{QUESTION}"
    words_wanted = max(0, (tokens * 3) // 4 - len(head.split()) - len(tail.split()))
    filler = [_FILLER[i % len(_FILLER)] for i in range(words_wanted)]
    return head + " ".join(filler) + tail


def cache_prefix(prompt: str) -> int:
    """The characters of ``prompt_of``'s prompt a cache mark covers: everything before the
    question (the fixed instruction, the fresh line and the filler, with its newline)."""
    return len(prompt) - len(QUESTION) if prompt.endswith(QUESTION) else 0
