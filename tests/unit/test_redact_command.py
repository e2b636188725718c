"""The command line a report shows (the HTML's Reproduce section): every credential out by
its place, whatever its length, then the run's secrets searched for as in all text."""

from __future__ import annotations

import pytest

from promptpath.core.redaction import MARKER, Redactor
from promptpath.plan.flags import FLAGS
from promptpath.report.redact import CREDENTIAL_OPTIONS, command_line

NONE = Redactor.of([])


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        # A key-like query value, the fragment, a header by name and one by its value.
        (
            ["run", "https://h/v1/x?api_key=Zq7Kp#token=FRAG", "-H", "x-api-key: Zq7Kp"],
            ["run", f"https://h/v1/x?api_key={MARKER}", "-H", f"x-api-key: {MARKER}"],
        ),
        (
            ["run", "https://h/v1/x", "--header=Authentication: Bearer Au7h", "-HX-Api-Key-V2: k"],
            [
                "run", "https://h/v1/x",
                f"--header=Authentication: {MARKER}", f"-HX-Api-Key-V2: {MARKER}",
            ],
        ),
        # Short options clustered before the one that takes the value.
        (
            ["run", "https://h/x", "-vH", "api-key: k1", "-kx", "u:p@127.0.0.1:3128"],
            ["run", "https://h/x", "-vH", f"api-key: {MARKER}", "-kx", f"{MARKER}@127.0.0.1:3128"],
        ),
        # The exports' and the canary's URLs: their userinfo, in both spellings of an option.
        (
            [
                "run", "https://h/x", "--otlp-endpoint", "http://o:Op@127.0.0.1:4318",
                "--pushgateway=http://pg:Pg@127.0.0.1:9091", "--canary-admin", "http://a:Ad@h:1/",
                "--proxy", "http://alice:pw@127.0.0.1:3128", "--proxy-user", "bob:pw2",
            ],
            [
                "run", "https://h/x", "--otlp-endpoint", f"http://{MARKER}@127.0.0.1:4318",
                f"--pushgateway=http://{MARKER}@127.0.0.1:9091", "--canary-admin",
                f"http://{MARKER}@h:1/", "--proxy", f"http://{MARKER}@127.0.0.1:3128",
                "--proxy-user", MARKER,
            ],
        ),
        # What holds no credential stays as written.
        (
            ["run", "https://h/x?model=m", "-H", "x-promptpath-tokens: 5", "-p", "-x is a flag"],
            ["run", "https://h/x?model=m", "-H", "x-promptpath-tokens: 5", "-p", "-x is a flag"],
        ),
        # After "--" every argument is positional: a URL still loses its userinfo.
        (["run", "--", "https://u:p@h/x"], ["run", "--", f"https://{MARKER}@h/x"]),
    ],
)  # fmt: skip
def test_each_credential_leaves_the_command_line_by_its_place(
    argv: list[str], shown: list[str]
) -> None:
    assert list(command_line(argv, NONE)) == shown


def test_the_runs_secrets_are_searched_for_in_every_argument_as_well() -> None:
    key = "sk-a-long-key-0123456789"
    shown = command_line(["run", "https://h/x", "-p", f"my key is {key}"], Redactor.of([key]))
    assert shown[-1] == f"my key is {MARKER}"


def test_every_option_named_there_is_one_the_commands_take() -> None:
    # A renamed option would silently show its credential again.
    spellings = {decl for flag in FLAGS for decls in flag.decls for decl in decls.split("/")}
    assert set(CREDENTIAL_OPTIONS) <= spellings
