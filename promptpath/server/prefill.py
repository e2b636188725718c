"""Prefill emulated: a first token later by N ms per 1,000 input tokens, and a prefix cache.

A real endpoint's time to first token grows with the prompt (prefill runs over every input
token before the first output token) and shrinks for a prefix its cache holds (the keys and
values of those tokens are not computed again). ``--prefill-ms-per-1k`` plays the first:
the first token waits ``ttft-ms`` plus N ms per 1,000 input tokens (counted as the usage
reports them, server/tokens.py). ``--prefix-cache`` plays the second: every prompt's
prefixes are remembered in blocks of ``BLOCK_WORDS`` words (providers cache in blocks too:
OpenAI in 128-token steps), matched from the first word on, and the tokens of the longest
remembered prefix are reported as cached in each dialect's own usage field and taken off
the prefill delay.

An API that caches only what a request marks (Anthropic's ``cache_control``, Converse's
``cachePoint``: the emulation's ``marked_prefixes``) is played as it behaves: a prefix is
remembered only where a mark ends it, and only from ``MIN_MARKED_TOKENS`` on (shorter ones
are not cached, mark or no mark); a later request marking the same prefix reads all of it,
from its longest remembered mark (``read_marked``); the marked tokens not read are written
(``cache_creation_input_tokens``, ``cacheWriteInputTokens``). An unmarked request is never
cached and leaves nothing for the next.

Memory is bounded: at most ``MAX_BLOCKS`` prefix digests (16 bytes each), the least
recently used forgotten first.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

from promptpath.server.dialect import Dialect

__all__ = [
    "BLOCK_WORDS",
    "MAX_BLOCKS",
    "MIN_MARKED_TOKENS",
    "PrefixCache",
    "cache_tokens",
    "prefill_ms",
    "tokens_of_words",
]

#: Prefix granularity, in words (48 words are 64 tokens by server/tokens.py's count).
BLOCK_WORDS = 48
#: Prefix digests kept (16 B each, plus the dict's overhead: ~10 MB at most).
MAX_BLOCKS = 100_000
#: The shortest marked prefix cached (tokens): Anthropic's minimum for most Claude models
#: (2,048 for the Haikus 3 and 3.5, 4,096 for Opus 4.5 and Haiku 4.5), Bedrock's the same.
MIN_MARKED_TOKENS = 1024


def tokens_of_words(n_words: int) -> int:
    """The token count server/tokens.py gives ``n_words`` words (0 for none)."""
    return 0 if n_words <= 0 else (n_words * 4 + 2) // 3


def prefill_ms(ms_per_1k: float, prompt_tokens: int, cached_tokens: int) -> float:
    """The first-token delay prefill adds: N ms per 1,000 input tokens not cached."""
    return ms_per_1k * max(0, prompt_tokens - cached_tokens) / 1000.0


class PrefixCache:
    """The prefixes of the prompts seen, in whole blocks of words, least recent out first."""

    def __init__(self, *, block_words: int = BLOCK_WORDS, max_blocks: int = MAX_BLOCKS) -> None:
        self._block = block_words
        self._max = max_blocks
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def _digests(self, words: Sequence[str]) -> list[bytes]:
        """The digest of each whole-block prefix of ``words``, shortest first."""
        h = hashlib.blake2b(digest_size=16)
        out: list[bytes] = []
        for start in range(0, len(words) - self._block + 1, self._block):
            for word in words[start : start + self._block]:
                h.update(word.encode("utf-8", "surrogatepass"))
                h.update(b"\x00")
            out.append(h.copy().digest())
        return out

    def lookup_and_remember(self, words: Sequence[str]) -> int:
        """How many leading words of ``words`` a remembered prompt shared (whole blocks);
        then ``words``' own prefixes are remembered for the prompts after it."""
        digests = self._digests(words)
        hit = 0
        for n, digest in enumerate(digests, start=1):
            if digest not in self._seen:
                break
            hit = n
        for digest in digests:
            self._seen[digest] = None
            self._seen.move_to_end(digest)
        self._trim()
        return hit * self._block

    def read_marked(self, words: Sequence[str], ends: Sequence[int]) -> tuple[int, int]:
        """(words read, words written) for a request whose marks end prefixes of
        ``words`` at ``ends`` (word counts): the longest marked prefix remembered is read,
        the rest of the longest one cacheable written; every cacheable one is remembered."""
        cacheable = sorted({e for e in ends if tokens_of_words(e) >= MIN_MARKED_TOKENS})
        if not cacheable:
            return 0, 0
        h = hashlib.blake2b(b"marked\x00", digest_size=16)
        digests: list[tuple[int, bytes]] = []
        done = 0
        for end in cacheable:
            for word in words[done:end]:
                h.update(word.encode("utf-8", "surrogatepass"))
                h.update(b"\x00")
            done = end
            digests.append((end, h.copy().digest()))
        read = max((end for end, d in digests if d in self._seen), default=0)
        for _end, digest in digests:
            self._seen[digest] = None
            self._seen.move_to_end(digest)
        self._trim()
        return read, cacheable[-1] - read

    def _trim(self) -> None:
        while len(self._seen) > self._max:
            self._seen.popitem(last=False)


def cache_tokens(
    cache: PrefixCache, dialect: type[Dialect], body: object, prompt_tokens: int
) -> tuple[int, int]:
    """(tokens read, tokens written) of a request's prompt under ``--prefix-cache``: any
    prefix for a dialect that caches by itself (nothing written is reported), only a
    marked one for a dialect that caches what is marked."""
    marked = dialect.marked_prefixes(body)
    if marked is None:
        hit = cache.lookup_and_remember(dialect.prompt_words(body))
        return min(prompt_tokens, tokens_of_words(hit)), 0
    read, written = cache.read_marked(*marked)
    cached = min(prompt_tokens, tokens_of_words(read))
    return cached, min(prompt_tokens - cached, tokens_of_words(read + written) - cached)
