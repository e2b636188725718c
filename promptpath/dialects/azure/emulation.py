"""The reference endpoint's Azure OpenAI: OpenAI's chunks plus the content filter's own
(the prompt's verdict first, the output's in batches: the ``filter-batch`` control)."""

from __future__ import annotations

from typing import ClassVar

from promptpath.dialects.openai.emulation import ChatCompletions
from promptpath.server.dialect import Event, Finish, JSONObject, RequestInfo

__all__ = ["AzureChatCompletions"]


_SAFE = {"filtered": False, "severity": "safe"}
_VERDICTS: JSONObject = {
    "hate": _SAFE,
    "self_harm": _SAFE,
    "sexual": _SAFE,
    "violence": _SAFE,
}


class AzureChatCompletions(ChatCompletions):
    """The deployment in the path is the model that answers."""

    name: ClassVar[str] = "azure"
    model_in_path: ClassVar[bool] = True

    def __init__(self, info: RequestInfo) -> None:
        super().__init__(info)
        self._chars = 0  # characters of answer (and reasoning) sent
        self._checked = 0  # ... of which a verdict covered this many

    def events_for(self, text: str, *, reasoning: bool = False) -> list[Event]:
        self._chars += len(text)
        return super().events_for(text, reasoning=reasoning)

    def _verdict(self) -> Event:
        start, self._checked = self._checked, self._chars
        return Event(
            self._chunk(
                [
                    {
                        "index": 0,
                        "delta": {},
                        "finish_reason": None,
                        "content_filter_results": _VERDICTS,
                        "content_filter_offsets": {
                            "check_offset": start,
                            "start_offset": start,
                            "end_offset": self._chars,
                        },
                    }
                ]
            )
        )

    def filter_verdict(self) -> list[Event]:
        return [self._verdict()] if self._chars > self._checked else []

    def opening(self) -> list[Event]:
        prompt_filter: JSONObject = {
            "choices": [],
            "created": 0,
            "id": "",
            "model": "",
            "object": "",
            "prompt_filter_results": [
                {
                    "prompt_index": 0,
                    "content_filter_results": {
                        **_VERDICTS,
                        "jailbreak": {"filtered": False, "detected": False},
                    },
                }
            ],
        }
        return [Event(prompt_filter), *super().opening()]

    def closing(self, finish: Finish, output_tokens: int, elapsed_ns: int) -> list[Event]:
        # The verdict on what no batch covered yet (all of it without filter-batch).
        return [*self.filter_verdict(), *super().closing(finish, output_tokens, elapsed_ns)]
