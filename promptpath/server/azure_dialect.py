"""Azure OpenAI chat completions: OpenAI's chunks plus the content filter's own.

``/openai/deployments/D/chat/completions?api-version=…`` and ``/openai/v1/chat/completions``.
With the default content filter the stream opens with a chunk that has no choices, only
``prompt_filter_results`` (the prompt's verdict), and the filter's verdicts on the output
come as chunks whose one choice has an empty delta, ``content_filter_results`` and
``content_filter_offsets``. Neither is a token nor an error: openai-python hands them to
the application as chunks with no content.
"""

from __future__ import annotations

from typing import ClassVar

from promptpath.server.dialect import Event, Finish, JSONObject
from promptpath.server.openai_dialects import ChatCompletions

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
        verdict = self._chunk(
            [
                {
                    "index": 0,
                    "delta": {},
                    "finish_reason": None,
                    "content_filter_results": _VERDICTS,
                    "content_filter_offsets": {
                        "check_offset": 0,
                        "start_offset": 0,
                        "end_offset": output_tokens,
                    },
                }
            ]
        )
        return [Event(verdict), *super().closing(finish, output_tokens, elapsed_ns)]
