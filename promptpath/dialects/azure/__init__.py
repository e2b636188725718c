"""Azure OpenAI chat completions, one plug-in on OpenAI's (openai.py: its body, decoder and
emulation): OpenAI's chunks plus the content filter's own.

``/openai/deployments/D/chat/completions?api-version=…`` and ``/openai/v1/chat/completions``.
With the default content filter the stream opens with a chunk that has no choices, only
``prompt_filter_results`` (the prompt's verdict), and the filter's verdicts on the output
come as chunks whose one choice has an empty delta, ``content_filter_results`` and
``content_filter_offsets`` (character offsets into the answer: where the checked span
starts and ends). Neither is a token nor an error: openai-python hands them to the
application as chunks with no content.

In the default streaming mode the filter buffers the output, checks it and releases it in
chunks of its buffer's size, each with its verdict (Azure OpenAI's "Content streaming"
page); the Asynchronous Filter mode streams token by token and sends the verdicts later.
The ``filter-batch`` control plays the default mode: a verdict after each released batch.
"""

from __future__ import annotations

import re
from typing import ClassVar

from promptpath.dialects.openai import ChatCompletions, OpenAIChatDecoder, chat_body
from promptpath.dialects.spec import DialectSpec, DocRow, model_named_in_path
from promptpath.server.dialect import Event, Finish, JSONObject, RequestInfo

__all__ = [
    "SPEC",
    "AzureChatCompletions",
]


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


SPEC = DialectSpec(
    name="azure",
    title="Azure OpenAI",
    # /openai/deployments/D/chat/completions?api-version=..., /openai/v1/chat/completions
    path_patterns=(
        re.compile(r"^/openai/deployments/[^/]+/chat/completions$"),
        re.compile(r"^/openai/v1/chat/completions$"),
    ),
    # The deployment in the URL is what answers; the SDK sends it as "model" too.
    model_in_path=model_named_in_path,
    default_model="gpt-4o-mini",
    key_env="AZURE_OPENAI_API_KEY",
    # openai's AzureOpenAI takes an Entra token from AZURE_OPENAI_AD_TOKEN when it has no
    # key, sent as a bearer token.
    key_fallbacks=("AZURE_OPENAI_AD_TOKEN",),
    key_header="api-key",
    bearer_key_envs=frozenset({"AZURE_OPENAI_AD_TOKEN"}),
    client="openai-python",
    # openai's AzureOpenAI sends the chat body unchanged (the deployment as "model").
    body=chat_body,
    decoder=OpenAIChatDecoder,
    otel_provider="azure.ai.openai",
    emulation=AzureChatCompletions,
    docs=(
        DocRow(
            detection="`/openai/deployments/D/chat/completions?api-version=…`,"
            " `/openai/v1/chat/completions`",
            auth="`api-key`; an Entra token as `Authorization: Bearer`",
            keys="`AZURE_OPENAI_API_KEY`, else `AZURE_OPENAI_AD_TOKEN` (bearer)",
            end="`data: [DONE]`",
        ),
    ),
)
