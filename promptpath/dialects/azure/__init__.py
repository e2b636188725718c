"""Azure OpenAI chat completions, one plug-in on OpenAI's (openai/: its body, decoder and
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

from promptpath.dialects.openai import SPEC as OPENAI
from promptpath.dialects.openai import OpenAIChatDecoder, chat_body
from promptpath.dialects.spec import DialectSpec, DocRow, model_named_in_path

__all__ = [
    "SPEC",
]


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
    client=OPENAI.client,  # openai's AzureOpenAI
    # openai's AzureOpenAI sends the chat body unchanged (the deployment as "model").
    body=chat_body,
    decoder=OpenAIChatDecoder,
    otel_provider="azure.ai.openai",
    emulation="AzureChatCompletions",
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
