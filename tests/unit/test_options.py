from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from promptpath.cli.commands import RunArgs, build_options
from promptpath.core.errors import UsageError
from promptpath.dialects.plugins import detect_provider
from promptpath.options import (
    ConnectTo,
    check_timeout,
    parse_connect_to,
    parse_header,
    parse_resolve,
    parse_target,
)


def test_target_defaults_port_by_scheme() -> None:
    assert parse_target("https://api.example.com/v1/messages").port == 443
    assert parse_target("http://127.0.0.1/api/chat").port == 80
    t = parse_target("https://[::1]:8443/v1/chat/completions?x=1")
    assert (t.host, t.port, t.path) == ("::1", 8443, "/v1/chat/completions?x=1")


@pytest.mark.parametrize(
    "url", ["ftp://x/y", "https:///nohost", "not a url", "https://h:99999/", "https://h:0/v1"]
)
def test_bad_targets_are_usage_errors(url: str) -> None:
    with pytest.raises(UsageError):
        parse_target(url)


@pytest.mark.parametrize(
    ("path", "provider"),
    [
        ("/v1/chat/completions", "openai"),
        ("/openai/deployments/x/chat/completions?api-version=1", "azure"),
        ("/openai/v1/chat/completions", "azure"),
        ("/gateway/openai/v1/chat/completions", "openai"),  # a proxy's prefix: plain OpenAI
        ("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini"),
        ("/v1/models/gemini-2.5-flash:streamGenerateContent", "gemini"),
        ("/v1beta/tunedModels/my-bgp-tune:streamGenerateContent?alt=sse", "gemini"),
        (
            "/v1/projects/p/locations/us-central1/publishers/google/models/"
            "gemini-2.5-pro:streamGenerateContent?alt=sse",
            "vertex",
        ),
        ("/v1beta/models/gemini-2.5-flash:generateContent", None),  # not a stream
        ("/v1/responses", "responses"),
        ("/v1/messages", "anthropic"),
        ("/api/chat", "ollama"),
        ("/v1/embeddings", None),
    ],
)
def test_provider_detected_from_path(path: str, provider: str | None) -> None:
    assert detect_provider(path) == provider


def test_resolve_spec_accepts_ipv4_and_bracketed_ipv6() -> None:
    assert parse_resolve("api.example.com:443:127.0.0.1") == ("api.example.com", 443, "127.0.0.1")
    assert parse_resolve("h:8443:[::1]") == ("h", 8443, "::1")
    for bad in ("h:443", "h:x:1.2.3.4", "h:443:not-an-ip"):
        with pytest.raises(UsageError):
            parse_resolve(bad)


def test_header_spec() -> None:
    assert parse_header("X-Test:  a b ") == ("X-Test", "a b")
    with pytest.raises(UsageError):
        parse_header("no-colon")


def test_api_key_comes_from_the_named_env_var_and_is_not_in_repr() -> None:
    args = RunArgs(target="https://h/v1/messages", api_key_env="MY_KEY")
    opts = build_options(args, environ={"MY_KEY": "sk-secret-123"})
    assert opts.api_key == "sk-secret-123"
    assert "sk-secret-123" not in repr(opts)
    default = build_options(
        RunArgs(target="https://h/v1/messages"), environ={"ANTHROPIC_API_KEY": "k"}
    )
    assert default.api_key == "k" and default.api_key_env == "ANTHROPIC_API_KEY"


def test_option_validation() -> None:
    with pytest.raises(UsageError, match="provider"):
        build_options(RunArgs(target="https://h/v1/other"), environ={})
    with pytest.raises(UsageError, match="--http"):
        build_options(RunArgs(target="https://h/v1/messages", http="4"), environ={})
    with pytest.raises(UsageError, match="exclude"):
        build_options(RunArgs(target="https://h/v1/messages", both_families=True), environ={})
    opts = build_options(
        RunArgs(target="https://h/api/x", provider="ollama", family=socket.AF_INET6), environ={}
    )
    assert opts.provider == "ollama" and opts.family == socket.AF_INET6


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("https://[::1/v1/chat/completions", "not a valid URL"),
        ("https://user:pw@h/v1/messages", "credentials"),
    ],
)
def test_malformed_or_credentialed_urls_are_usage_errors(url: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        parse_target(url)


@pytest.mark.parametrize(
    "spec", ["Bad Name: v", "X-A: a\r\nEvil: b", "X-U: é", "X-N: a\x00b", "(x): y"]
)
def test_headers_that_cannot_go_on_the_wire_are_refused_before_sending(spec: str) -> None:
    with pytest.raises(UsageError):
        parse_header(spec)


def test_display_url_hides_credential_query_values() -> None:
    from promptpath.options import display_url

    shown = display_url("https://h/v1/x?key=SECRET&api_token=T2&model=m")
    assert "SECRET" not in shown and "T2" not in shown and "model=m" in shown
    assert display_url("https://h/v1/x") == "https://h/v1/x"


def test_the_fragment_is_never_kept_in_the_target() -> None:
    target = parse_target("https://h/v1/chat/completions?m=1#token=FRAG")
    assert target.url == "https://h/v1/chat/completions?m=1"
    assert target.path == "/v1/chat/completions?m=1"


@pytest.mark.parametrize(
    "url",
    [
        "https://u:Pw7@[::1/v1/x?api_key=Zq7#t=F1",  # not a valid URL
        "ftp://u:Pw7@h/v1/x?api_key=Zq7#t=F1",  # not http(s)
        "https://u:Pw7@h:99999/v1/x?api_key=Zq7#t=F1",  # a bad port
        "https://u:Pw7@h:0/v1/x?api_key=Zq7#t=F1",
    ],
)
def test_a_refused_target_is_quoted_without_its_credentials(url: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_target(url)
    message = refused.value.message
    assert not any(s in message for s in ("Pw7", "Zq7", "F1")), message


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), 0.0, -1.0, 1e300, 86_400.5])
def test_timeout_must_be_a_finite_positive_number(timeout: float) -> None:
    with pytest.raises(UsageError, match="--timeout"):
        build_options(RunArgs(target="https://h/v1/messages", timeout=timeout), environ={})


def test_cacert_that_is_not_pem_is_a_usage_error(tmp_path: object) -> None:
    with pytest.raises(UsageError, match="not a PEM"):
        build_options(RunArgs(target="https://h/v1/messages", cacert="/etc/hostname"), environ={})


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/dev/zero", "/dev/zero: is a character device, not a file"),
        ("/tmp", "/tmp: is a directory"),
        ("/nonexistent/ca.pem", "file not found"),
    ],
)
def test_a_cacert_that_is_no_file_says_what_it_is(path: str, says: str) -> None:
    with pytest.raises(UsageError) as refused:
        build_options(RunArgs(target="https://h/v1/messages", cacert=path), environ={})
    assert says in refused.value.message and refused.value.exit_code == 2


def test_a_cacert_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "ca.fifo"
    os.mkfifo(fifo)  # nobody writes: opening it would block for ever
    with pytest.raises(UsageError, match="is a FIFO, not a file"):
        build_options(RunArgs(target="https://h/v1/messages", cacert=str(fifo)), environ={})


def test_connect_to_reads_curls_four_fields_with_bracketed_ipv6() -> None:
    rule = parse_connect_to("api.example.com:443:[::1]:8443")
    assert rule == ConnectTo(
        host="api.example.com",
        port=443,
        to_host="::1",
        to_port=8443,
        spec="api.example.com:443:[::1]:8443",
    )
    assert rule.matches("API.example.com", 443) and not rule.matches("api.example.com", 8443)
    assert rule.destination("api.example.com", 443) == ("::1", 8443)


def test_connect_to_empty_fields_mean_any_source_and_the_same_destination() -> None:
    anything = parse_connect_to("::backend.internal:")
    assert anything.matches("a.example", 1) and anything.matches("b.example", 443)
    assert anything.destination("a.example", 8443) == ("backend.internal", 8443)
    port_only = parse_connect_to("h:443::9443")
    assert port_only.destination("h", 443) == ("h", 9443)


def test_the_first_matching_connect_to_rule_wins() -> None:
    opts = build_options(
        RunArgs(
            target="https://h:8443/v1/messages",
            connect_to=["other:8443:x:1", "h::first:2", "h:8443:second:3"],
        ),
        environ={},
    )
    rule = opts.connect_to_for("h", 8443)
    assert rule is not None and rule.destination("h", 8443) == ("first", 2)
    assert opts.connect_to_for("nothing", 1) is None


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("h:443:x", "4 fields"),
        ("h:443:x:1:2", "4 fields"),
        ("h:443:[::1:1", "4 fields"),
        ("h:https:x:443", "not a port"),
        ("h:443:x:0", "not a port"),
        ("h:443:x:65536", "not a port"),
        ("h:-1:x:443", "not a port"),
    ],
)
def test_bad_connect_to_is_a_one_line_usage_error(spec: str, match: str) -> None:
    with pytest.raises(UsageError, match=match) as caught:
        build_options(RunArgs(target="https://h/v1/messages", connect_to=[spec]), environ={})
    assert "\n" not in caught.value.message and caught.value.kind == "bad_option"


def test_sslkeylogfile_comes_from_the_given_environment(tmp_path: Path) -> None:
    keylog = tmp_path / "keys.log"
    args = RunArgs(target="https://h/v1/messages")
    assert build_options(args, environ={"SSLKEYLOGFILE": str(keylog)}).keylog_file == str(keylog)
    assert keylog.exists()  # opened for appending, as the ssl module would
    assert build_options(args, environ={"SSLKEYLOGFILE": ""}).keylog_file is None


def test_an_sslkeylogfile_that_cannot_be_written_is_named_not_blamed_on_cacert(
    tmp_path: Path,
) -> None:
    # Observed before: the ssl module opened it inside --cacert's check, which then said
    # "--cacert ...: not a PEM certificate bundle" for a perfectly good CA file.
    environ = {"SSLKEYLOGFILE": str(tmp_path / "no" / "such" / "dir" / "keys.log")}
    with pytest.raises(UsageError, match="SSLKEYLOGFILE cannot be appended to"):
        build_options(RunArgs(target="https://h/v1/messages"), environ=environ)


@pytest.mark.parametrize(
    "spec",
    [
        "h:70000:127.0.0.1",  # no such port
        "h:0:127.0.0.1",
        "h:443:[::1",  # unbalanced brackets
        "h:443:::1]",
        "h:443:[[::1]]",
        "h:443:[127.0.0.1]",  # brackets hold IPv6 only
    ],
)
def test_resolve_spec_refuses_bad_ports_and_unbalanced_brackets(spec: str) -> None:
    with pytest.raises(UsageError):
        parse_resolve(spec)


@pytest.mark.parametrize("spec", ["[::1:443::80", "h:443:[::1:80", "::1]:443::80"])
def test_connect_to_refuses_unbalanced_brackets(spec: str) -> None:
    with pytest.raises(UsageError):
        parse_connect_to(spec)


@pytest.mark.parametrize(
    "spec",
    [
        "Content-Length: 3",
        "transfer-encoding: chunked",
        "Connection: close",
        "Keep-Alive: 5",
        "Proxy-Connection: keep-alive",
        "Upgrade: h2c",
        "TE: gzip",
    ],
)
def test_framing_and_connection_specific_headers_are_refused_with_a_reason(spec: str) -> None:
    with pytest.raises(UsageError, match=r"refused: .{20,}"):
        parse_header(spec)


def test_host_and_te_trailers_are_accepted_as_given() -> None:
    assert parse_header("Host: vhost.example:8443") == ("Host", "vhost.example:8443")
    assert parse_header("host: [::1]") == ("host", "[::1]")
    assert parse_header("TE: trailers") == ("TE", "trailers")


@pytest.mark.parametrize("value", ["a b", "a/b", "a@b", "h:99999", "[::1", "h:0"])
def test_a_host_value_that_is_not_host_port_is_refused(value: str) -> None:
    with pytest.raises(UsageError, match="Host"):
        parse_header(f"Host: {value}")


def test_at_most_one_host_header() -> None:
    from promptpath.options import parse_headers

    assert parse_headers(["X-A: 1", "X-A: 2", "Host: h"]) == (
        ("X-A", "1"),
        ("X-A", "2"),
        ("Host", "h"),
    )
    with pytest.raises(UsageError, match="more than once"):
        parse_headers(["Host: a", "host: b"])


def test_check_utf8_names_the_flag_and_the_byte_and_passes_real_text() -> None:
    import os

    from promptpath.options import check_argv_utf8, check_utf8

    assert check_utf8("naïve – 日本", "-p") == "naïve – 日本"
    with pytest.raises(UsageError, match=r"-m is not valid UTF-8 \(byte 0xc3\)"):
        check_utf8(os.fsdecode(b"\xc3("), "-m")
    with pytest.raises(UsageError, match="the value of -m"):
        check_argv_utf8(["run", "URL", "-m", os.fsdecode(b"\xc3(")])
    with pytest.raises(UsageError, match="--model is"):
        check_argv_utf8(["run", "--model=" + os.fsdecode(b"\xff")])
    with pytest.raises(UsageError, match="an argument"):
        check_argv_utf8(["run", os.fsdecode(b"http://h/\xff")])
    check_argv_utf8(["run", "https://h/v1/messages", "-p", "ça va"])


def test_timeout_bound_is_a_day_and_a_bool_is_not_a_number() -> None:
    assert check_timeout(86_400) == 86_400.0 and check_timeout(1e-9) == 1e-9
    with pytest.raises(UsageError, match="at most 86400 s"):
        check_timeout(1e300)
    with pytest.raises(UsageError, match="number of seconds, got True"):
        check_timeout(True)  # bool is an int subclass: not 1 s


def test_an_sslkeylogfile_fifo_without_a_reader_is_refused_at_once(tmp_path: Path) -> None:
    # Checked by hand: `mkfifo keys.fifo; SSLKEYLOGFILE=keys.fifo` held build_options in
    # open() until killed (a FIFO opened for writing blocks until a reader opens it).
    fifo = tmp_path / "keys.fifo"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="FIFO with no reader"):
        build_options(RunArgs(target="https://h/v1/messages"), environ={"SSLKEYLOGFILE": str(fifo)})


def test_an_sslkeylogfile_fifo_with_a_reader_is_taken(tmp_path: Path) -> None:
    fifo = tmp_path / "keys.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # Wireshark's end of the pipe
    try:
        args = RunArgs(target="https://h/v1/messages")
        options = build_options(args, environ={"SSLKEYLOGFILE": str(fifo)})
        assert options.keylog_file == str(fifo)
    finally:
        os.close(reader)


LONG_LABEL = "a" * 64


@pytest.mark.parametrize(
    ("host", "wire"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "::1"),
        ("example.test", "example.test"),
        ("example.test.", "example.test."),  # fully qualified: the root's dot kept
        ("a" * 63 + ".test", "a" * 63 + ".test"),  # RFC 1035's longest label
        (".".join(["a" * 63] * 3 + ["b" * 61]), ".".join(["a" * 63] * 3 + ["b" * 61])),  # 253
        # IDNA 2008, lower-cased first, as httpx (the SDKs' client) writes it.
        ("exämple.invalid", "xn--exmple-cua.invalid"),
        ("EXÄMPLE.invalid", "xn--exmple-cua.invalid"),
        ("bücher.例え.テスト", "xn--bcher-kva.xn--r8jz45g.xn--zckzah"),
    ],
)
def test_a_host_name_goes_on_the_wire_in_ascii(host: str, wire: str) -> None:
    from promptpath.core.addr import wire_host

    assert wire_host(host) == wire


@pytest.mark.parametrize(
    ("host", "said"),
    [
        (f"{LONG_LABEL}.test", "has a label longer than 63 characters"),
        (".".join(["a" * 63] * 3 + ["b" * 62]), "is longer than 253 characters"),
        ("a..test", "has an empty label"),
        (f"ä{LONG_LABEL}.test", "is not a valid internationalised name"),
        ("a\u200db.test", "is not a valid internationalised name"),  # ZWJ outside its context
    ],
)
def test_a_name_no_dns_can_carry_is_refused_with_why(host: str, said: str) -> None:
    from promptpath.core.addr import wire_host

    with pytest.raises(ValueError, match=said):
        wire_host(host)


def test_an_idn_target_resolve_and_connect_to_all_speak_the_ascii_name() -> None:
    # Python's own idna codec (getaddrinfo, the TLS handshake) and httpcore's header
    # check refused the U-label deep in the run: exit 70 before.
    target = parse_target("https://exämple.invalid:8443/v1/chat/completions")
    assert target.host == "xn--exmple-cua.invalid"
    assert target.url == "https://exämple.invalid:8443/v1/chat/completions"  # as given
    assert parse_resolve("Exämple.invalid:8443:127.0.0.1")[0] == "xn--exmple-cua.invalid"
    rule = parse_connect_to("exämple.invalid:8443:bücher.invalid:9443")
    assert (rule.host, rule.to_host) == ("xn--exmple-cua.invalid", "xn--bcher-kva.invalid")


@pytest.mark.parametrize(
    ("parse", "text", "said"),
    [
        (parse_target, f"https://{LONG_LABEL}.invalid/v1", "target host name has a label"),
        (parse_resolve, f"{LONG_LABEL}.invalid:443:127.0.0.1", "--resolve: the host name"),
        (parse_connect_to, f"::{LONG_LABEL}.invalid:443", "--connect-to: the host name"),
    ],
)
def test_a_label_over_63_characters_is_a_usage_error_naming_the_option(
    parse: object, text: str, said: str
) -> None:
    with pytest.raises(UsageError, match=said) as caught:
        parse(text)  # type: ignore[operator]
    assert caught.value.exit_code == 2


def test_an_input_file_is_read_whole_up_to_its_limit_and_never_past_it(tmp_path: Path) -> None:
    from promptpath.options import InputFileError, read_input

    path = tmp_path / "ca.pem"
    path.write_bytes(b"x" * 1000)
    assert read_input(path, 1000) == b"x" * 1000
    with pytest.raises(InputFileError, match="is larger than"):
        read_input(path, 999)
    with pytest.raises(InputFileError, match="No such file"):
        read_input(tmp_path / "absent.pem", 1000)


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "socket"])
def test_an_input_file_that_is_no_regular_file_is_refused_without_blocking(
    tmp_path: Path, kind: str
) -> None:
    from promptpath.options import InputFileError, read_input

    path = tmp_path / "cert.pem"
    if kind == "fifo":
        os.mkfifo(path)  # no writer: a plain open() for reading blocks until one comes
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    else:
        path = Path("/dev/zero")
    with pytest.raises(InputFileError, match=r"not a regular file|No such device"):
        read_input(path, 1 << 20)
