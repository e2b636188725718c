"""The dialects and client shapes by name, and nothing else: ``--help`` reads it.

Cheap on purpose (the standard library's ``typing`` only): the option table, the checks of
``--provider`` and ``--as``, the schema test and the docs read the names here, and no
plug-in is loaded for that. Each dialect is one plug-in, the package named after it under
``promptpath.dialects`` (``bedrock-invoke``: ``bedrock_invoke/``), whose ``SPEC`` says
everything else about it; ``plugins.py`` loads them when a run needs one.

The order is the order of ``--help``, of the schema's enums and of the sniffer's guesses.
Adding a dialect: its folder (and its tests), and its name here.
"""

from __future__ import annotations

from typing import Literal, get_args

#: The stream dialects, named for the API that speaks them.
Provider = Literal[
    "openai",
    "responses",
    "anthropic",
    "ollama",
    "gemini",
    "vertex",
    "azure",
    "realtime",
    "bedrock",
    "bedrock-invoke",
    "cohere",
]

#: Client shapes for --as: the SDK shapes the plug-ins define (each plug-in's ``shapes``),
#: then the clients of no dialect of their own (tracer/request.py).
ClientName = Literal[
    "openai-python",
    "anthropic-python",
    "ollama-python",
    "google-genai",
    "boto3",
    "cohere",
    "curl",
    "browser",
    "identity",
]

NAMES: tuple[Provider, ...] = get_args(Provider)
CLIENTS: tuple[ClientName, ...] = get_args(ClientName)

#: The dialect ``promptpath demo`` speaks unless --provider says (its --help shows it).
DEMO: Provider = "openai"

#: The dialects the demo offers: those whose plug-in names a ``demo_path`` (a unit test holds
#: the two together), so ``demo --help`` lists what ``demo --provider`` accepts.
DEMO_NAMES: tuple[Provider, ...] = ("openai", "responses", "anthropic", "ollama")


def module_of(name: Provider) -> str:
    """The module that holds ``name``'s plug-in."""
    return "promptpath.dialects." + name.replace("-", "_")


__all__ = ["CLIENTS", "DEMO", "DEMO_NAMES", "NAMES", "ClientName", "Provider", "module_of"]
