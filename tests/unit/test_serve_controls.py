"""serve's behaviour controls, declared once (server/controls.py): each row is the flag,
the header, the body field and the docs' row, and the docs hold the table as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptpath.server.behaviour import Behaviour, BehaviourError, from_request
from promptpath.server.command import SERVE_FLAGS, build_behaviour
from promptpath.server.controls import TABLE, Control, docs_table

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reference-endpoint.md"


def test_the_docs_hold_the_table_of_controls_as_declared() -> None:
    """Regenerate with: python -c 'from promptpath.server.controls import docs_table as t;
    print(t(), end="")' and paste it over the table in docs/reference-endpoint.md."""
    expected = docs_table()
    assert expected in DOCS.read_text(), "docs/reference-endpoint.md's table is stale:\n" + expected


def test_the_docs_table_has_one_row_per_control_with_its_three_names() -> None:
    rows = docs_table().splitlines()[2:]
    assert len(rows) == len(TABLE)
    for control, row in zip(TABLE, rows, strict=True):
        assert f"`x-promptpath-{control.name}`, `promptpath.{control.name}`" in row
        if control.flag is not None:
            assert row.startswith(f"| `--{control.name}")


def test_every_control_with_a_flag_is_an_option_of_serve_in_table_order() -> None:
    behaviour_flags = [f.decls[0] for f in SERVE_FLAGS if f.panel.startswith("Behaviour")]
    assert behaviour_flags == [f"--{c.name}" for c in TABLE if c.flag is not None]


@pytest.mark.parametrize(
    "control", [c for c in TABLE if c.flag is not None], ids=lambda c: str(c.name)
)
def test_each_flag_sets_what_its_header_sets(control: Control) -> None:
    """A flag is the server-wide default of its header: the same value, the same field."""
    value = {
        "body": "json",
        "accel-buffering": "no",
        "status": "429",
        "response-header": "x-ratelimit-remaining: 7",
        "cdn": "fastly:AMS",
    }.get(control.name, "3")
    flag_value: object = True if control.flag_type is bool else value
    if control.repeatable:
        flag_value = [value]
    via_flag = build_behaviour({control.name: flag_value})
    header = "yes" if control.flag_type is bool else value
    via_header, _ = from_request(Behaviour(), {control.header: header}, None)
    assert via_flag == via_header != Behaviour()


def test_a_bad_flag_is_named_as_its_flag() -> None:
    for control in TABLE:
        if control.flag is None or control.flag_type is bool:
            continue
        bad = "nocolon" if control.repeatable else "-x"
        with pytest.raises(BehaviourError) as caught:
            build_behaviour({control.name: [bad] if control.repeatable else bad})
        assert caught.value.header == control.flag
        assert caught.value.message.startswith(f"{bad!r} "), caught.value.message


def test_serve_help_names_every_dialect_the_server_registry_holds() -> None:
    """Read from the registry: the hand-written list this replaced had lost Bedrock."""
    from promptpath.server.routing import DIALECTS, WEBSOCKET_ONLY
    from tests.helpers.cli import run_cli

    res = run_cli("serve", "--help")
    assert res.exit_code == 0
    spoken = " ".join(res.stdout.split()).partition("It speaks ")[2].partition(", each at")[0]
    names = [name.removesuffix(" (WebSocket)") for name in spoken.split(", ")]
    assert names == [*DIALECTS, *sorted(WEBSOCKET_ONLY)]
    assert "bedrock" in names and "bedrock-invoke" in names
