"""The plug-ins, loaded by name, and what takes all of them: a dialect from a URL's path.

``dialect(name)`` imports the one module that holds ``name``'s plug-in (its ``SPEC``);
``dialects()`` every one, in the registry's order. A run loads them here, never at
``--help``: the registry alone names them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

from promptpath.dialects.registry import NAMES, Provider, module_of
from promptpath.dialects.spec import DialectSpec
from promptpath.streams.dialect_base import DialectDecoder

if TYPE_CHECKING:
    from promptpath.server.dialect import Dialect

__all__ = [
    "decoder_for",
    "detect_provider",
    "dialect",
    "dialects",
    "emulation",
    "key_from_env",
    "model_from_path",
]


def dialect(name: Provider) -> DialectSpec:
    """``name``'s plug-in (ValueError for a name the registry does not hold)."""
    if name not in NAMES:
        raise ValueError(f"no dialect named {name!r}")
    spec = importlib.import_module(module_of(name)).SPEC
    if not isinstance(spec, DialectSpec) or spec.name != name:  # a plug-in written wrong
        raise TypeError(f"{module_of(name)}.SPEC is not the {name} dialect's DialectSpec")
    return spec


def dialects() -> tuple[DialectSpec, ...]:
    """Every plug-in, in the registry's order."""
    return tuple(dialect(name) for name in NAMES)


def emulation(name: Provider) -> type[Dialect]:
    """``name``'s emulation for the reference endpoint, from its plug-in's ``emulation.py``
    (imported here, on the server's first route to it: no client run loads one)."""
    from promptpath.server.dialect import Dialect

    found = getattr(
        importlib.import_module(module_of(name) + ".emulation"), dialect(name).emulation
    )
    if not (isinstance(found, type) and issubclass(found, Dialect)):  # a plug-in written wrong
        raise TypeError(f"{module_of(name)}.emulation.{found!r} is not a server Dialect")
    return found


def decoder_for(provider: Provider) -> DialectDecoder:
    """A fresh dialect decoder for ``provider``."""
    try:
        spec = dialect(provider)
    except ValueError:
        raise ValueError(f"no stream dialect for provider {provider!r}") from None
    return spec.decoder()


def detect_provider(path: str) -> Provider | None:
    """The dialect a URL's path names: every plug-in's patterns first, then the suffixes."""
    bare = path.split("?", 1)[0].rstrip("/")
    specs = dialects()
    found = next((s for s in specs if s.matches(bare)), None)
    if found is None:
        found = next((s for s in specs if any(map(bare.endswith, s.path_suffixes))), None)
    return None if found is None else found.name


def model_from_path(provider: Provider, path: str) -> str | None:
    """The model (Gemini, Vertex, Bedrock) or deployment (Azure) the URL names, if any."""
    read = dialect(provider).model_in_path
    return None if read is None else read(path)


def key_from_env(
    provider: Provider, named: str | None, env: Mapping[str, str]
) -> tuple[str | None, str | None]:
    """(variable, key): the variable the user named, else the provider's, else its
    fallbacks in the SDK's order; the variable reported is the one the key came from
    (the default one when none is set)."""
    if named:
        return named, env.get(named) or None
    spec = dialect(provider)
    for name in (spec.key_env, *spec.key_fallbacks):
        if name and env.get(name):
            return name, env[name]
    return spec.key_env, None
