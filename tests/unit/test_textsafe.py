"""Untrusted text shown safely: control characters spelled out, JSON always valid Unicode."""

from __future__ import annotations

import json
import shutil
import subprocess
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptpath.core.textsafe import REPLACEMENT, is_visible, valid_unicode, visible
from promptpath.report.json import dumps

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[31mred", "\\x1b[31mred"),
        ("nul\x00", "nul\\x00"),
        ("bell\x07", "bell\\x07"),
        ("a\rb", "a\\rb"),
        ("line\n[PASS] spoof", "line\\n[PASS] spoof"),
        ("tab\there", "tab\\there"),
        ("del\x7f", "del\\x7f"),
        ("csi\x9b2J", "csi\\x9b2J"),
        ("rtl \u202eevil", "rtl \\u202eevil"),
        ("isolate \u2066x\u2069", "isolate \\u2066x\\u2069"),
        ("sep\u2028x", "sep\\u2028x"),
        ("lone \ud800", "lone \\ud800"),
        ("plain ü ✓ → 中文 emoji 😀", "plain ü ✓ → 中文 emoji 😀"),
    ],
)
def test_every_control_character_is_spelled_out_and_ordinary_text_is_not(
    raw: str, shown: str
) -> None:
    assert visible(raw) == shown
    assert is_visible(shown)


@given(st.text())
def test_visible_text_holds_no_control_character_and_encodes_as_utf8(text: str) -> None:
    shown = visible(text)
    assert is_visible(shown)
    shown.encode("utf-8")  # a lone surrogate would raise here, as it does on a terminal
    # No control (Cc), no surrogate (Cs), no bidi control or line/paragraph separator.
    bidi = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029")
    assert not any(unicodedata.category(ch) in ("Cc", "Cs") or ch in bidi for ch in shown)


def test_lone_surrogates_become_the_replacement_character_and_pairs_survive() -> None:
    assert valid_unicode("a\ud800b\udfffc") == f"a{REPLACEMENT}b{REPLACEMENT}c"
    assert valid_unicode("😀") == "😀"


def test_the_json_writer_emits_valid_unicode_that_jq_accepts() -> None:
    text = dumps({"error": {"message": "lone \ud800 and \udfff"}, "\udc80key": ["\ud83d"]})
    body = json.loads(text)
    assert body["error"]["message"] == f"lone {REPLACEMENT} and {REPLACEMENT}"
    assert body[f"{REPLACEMENT}key"] == [REPLACEMENT]
    text.encode("utf-8")
    jq = shutil.which("jq")
    if jq is None:
        pytest.skip("jq not installed (the python checks above held)")
    # jq 1.6 refuses "\ud800" ("Invalid \uXXXX\uXXXX surrogate pair escape"): checked by hand.
    done = subprocess.run([jq, "."], input=text.encode(), capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("isatty", [False, True])
def test_a_servers_emoji_code_reaches_the_terminal_as_the_characters_it_sent(
    isatty: bool,
) -> None:
    # rich's default turns ":warning:" into an emoji in every string it prints, markup off
    # or not (checked by hand: Console().print(":warning:", markup=False) prints the sign).
    import io

    from promptpath.environment import Environment
    from promptpath.modes.outcome import report_console
    from promptpath.modes.progress import progress_console

    out = io.StringIO()
    env = Environment(stdout=out, stderr=out, stderr_isatty=isatty, environ={"COLUMNS": "80"})
    consoles = [report_console(False, env)]
    if isatty:
        live = progress_console(env)
        assert live is not None
        consoles.append(live)
    for console in consoles:
        console.print("overloaded :warning: try later", markup=False)
    assert out.getvalue().count("overloaded :warning: try later") == len(consoles)
