"""The dialect table (docs/options.md, linked from the README) against the code: the table
the plug-ins write (dialects/doctable.py), a row for every Provider, each row's detection,
auth header and key variables as the code has them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from promptpath.dialects import doctable
from promptpath.dialects.plugins import detect_provider, dialect, dialects
from promptpath.dialects.registry import NAMES, Provider
from promptpath.tracer.request import auth_headers

pytestmark = pytest.mark.unit

ROOT = Path(__file__).parents[2]
HEADER = "| `--provider` | detected from the path |"

#: provider -> (a path the API is reached at, the words of it the detection cell names)
SAMPLES: dict[str, tuple[str, str]] = {
    "openai": ("/v1/chat/completions", "/chat/completions"),
    "responses": ("/v1/responses", "/responses"),
    "anthropic": ("/v1/messages", "/messages"),
    "ollama": ("/api/chat", "/api/chat"),
    "gemini": ("/v1beta/models/gemini-2.5-flash:streamGenerateContent", ":streamGenerateContent"),
    "vertex": (
        "/v1/projects/p/locations/l/publishers/google/models/m:streamGenerateContent",
        "/publishers/google/models/M:streamGenerateContent",
    ),
    "azure": (
        "/openai/deployments/d/chat/completions?api-version=2024-10-21",
        "/openai/deployments/D/",
    ),
    "realtime": ("/v1/realtime", "/realtime"),
    "bedrock": (
        "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream",
        "/converse-stream",
    ),
    "bedrock-invoke": (
        "/model/m/invoke-with-response-stream",
        "/invoke-with-response-stream",
    ),
    "cohere": ("/v2/chat", "/v2/chat"),
}


def rows() -> dict[str, list[str]]:
    """provider -> its row's cells (the WebSocket row of responses aside: same provider)."""
    lines = (ROOT / "docs/options.md").read_text().splitlines()
    start = lines.index(next(ln for ln in lines if ln.startswith(HEADER)))
    found: dict[str, list[str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = re.match(r"`([a-z-]+)`", cells[0])
        assert name is not None, line
        found.setdefault(name.group(1), cells)
    # "as bedrock": the cell says what another row's does
    for cells in found.values():
        for i, cell in enumerate(cells):
            same = re.fullmatch(r"as ([a-z-]+)", cell)
            if same is not None and same.group(1) in found:
                cells[i] = found[same.group(1)][i]
    return found


def test_every_provider_has_a_row_and_every_row_is_a_provider() -> None:
    assert set(rows()) == set(get_args(Provider))
    assert set(SAMPLES) == set(get_args(Provider))


@pytest.mark.parametrize("provider", get_args(Provider))
def test_the_row_says_the_detection_auth_and_key_variables_the_code_uses(provider: str) -> None:
    cells = rows()[provider]
    detection, auth, keys = cells[1], cells[2], cells[3]
    path, words = SAMPLES[provider]
    assert detect_provider(path) == provider, path
    assert words in detection, (provider, detection)
    header, value = auth_headers(provider, "k")[0]  # type: ignore[arg-type]
    said = "Authorization: Bearer" if header == "authorization" else f"`{header}`"
    assert said in auth, (provider, auth)
    assert value in ("k", "Bearer k")
    default = dialect(provider).key_env
    if default is None:
        assert keys.startswith("none"), (provider, keys)
    else:
        assert f"`{default}`" in keys, (provider, keys)
    for fallback in dialect(provider).key_fallbacks:
        assert f"`{fallback}`" in keys, (provider, keys)
        assert keys.index(f"`{default}`") < keys.index(f"`{fallback}`")  # the SDK's order


def test_the_readme_names_every_providers_key_variable_and_links_the_table() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "(docs/options.md)" in readme
    for variable in {d.key_env for d in dialects() if d.key_env is not None}:
        assert f"`{variable}`" in readme, variable


def test_the_docs_hold_the_table_the_plugins_write() -> None:
    # Regenerate with: python -m promptpath.dialects.doctable
    assert doctable.table() + "\n" in (ROOT / "docs/options.md").read_text()


def test_the_docs_list_every_provider_as_help_does() -> None:
    assert "`--provider " + "\\|".join(NAMES) + "`" in (ROOT / "docs/options.md").read_text()
