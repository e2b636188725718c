"""examples/exporter/ passes its checkers: promtool (config, rules, rule unit tests),
systemd-analyze verify (the unit), and the Kubernetes manifests agree with the CLI.

Observed by hand (2026-12-02): ``promtool test rules`` fails a test whose expected
annotation differs from the rendered one (it printed both); ``systemd-analyze verify``
exits 1 naming a missing ExecStart binary or a bad signal name, 0 on the shipped unit with
its paths pointed at this venv. The dashboard's and the rules' metric names are checked
against a real exporter's output in tests/integration/test_exporter.py.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from promptpath.plan import flags
from tests.conftest import require_binary

pytestmark = pytest.mark.lab

EXAMPLES = Path(__file__).parents[2] / "examples" / "exporter"
PROMPTPATH = Path(sys.executable).with_name("promptpath")


def _run(*args: str, cwd: Path = EXAMPLES) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def test_promtool_accepts_the_scrape_config_and_the_rules_and_their_unit_tests() -> None:
    promtool = require_binary("promtool")
    for args in (
        ("check", "config", "prometheus.yml"),
        ("check", "rules", "rules.yml"),
        ("test", "rules", "rules.test.yml"),
    ):
        done = _run(promtool, *args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        assert "SUCCESS" in done.stdout


def test_the_rule_unit_tests_can_fail(tmp_path: Path) -> None:
    # The same tests against a TTFT budget the series never crosses: promtool must say so.
    promtool = require_binary("promtool")
    for name in ("rules.yml", "rules.test.yml"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    rules = tmp_path / "rules.yml"
    rules.write_text(rules.read_text().replace("[30m]) > 0.8", "[30m]) > 5"))
    done = _run(promtool, "test", "rules", "rules.test.yml", cwd=tmp_path)
    assert done.returncode != 0
    assert "PromptpathTTFTOverBudget" in done.stdout + done.stderr


def _exec_args(line: str) -> list[str]:
    return shlex.split(line.split("=", 1)[1])


def test_systemd_verifies_the_unit_and_its_command_lines_parse(tmp_path: Path) -> None:
    unit = (EXAMPLES / "promptpath-exporter.service").read_text()
    starts = [
        line for line in unit.splitlines() if line.startswith(("ExecStart=", "ExecStartPre="))
    ]
    assert len(starts) == 2
    for line in starts:
        argv = _exec_args(line)
        assert argv[0] == "/opt/promptpath/.venv/bin/promptpath" and argv[1] == "exporter"
        _check_exporter_args(argv[2:])
    assert "SuccessExitStatus=143" in unit  # what SIGTERM's drain exits with
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (the unit was parsed above)")
    env_file = tmp_path / "exporter.env"
    env_file.write_text("")
    local = tmp_path / "promptpath-exporter.service"
    local.write_text(
        unit.replace("/opt/promptpath/.venv/bin/promptpath", str(PROMPTPATH)).replace(
            "/etc/promptpath/exporter.env", str(env_file)
        )
    )
    done = _run(analyze, "verify", str(local))
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "", done.stderr


def _check_exporter_args(args: list[str]) -> dict[str, str | bool]:
    """The exporter options in ``args``: each one the CLI declares, with its value."""
    known = {decl: flag for flag in flags.flags_of("exporter") for decl in flag.decls}
    given: dict[str, str | bool] = {}
    it = iter(args)
    for arg in it:
        assert arg in known, f"{arg} is not an option of promptpath exporter"
        flag = known[arg]
        given[flag.dest] = True if flag.type is bool else next(it)
    return given


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / "kubernetes" / name).read_text()) if d]


def test_the_kubernetes_manifests_agree_with_the_cli_and_with_each_other() -> None:
    docs = {d["kind"]: d for d in _documents("exporter.yaml")}
    assert set(docs) == {"ConfigMap", "Deployment", "Service"}
    pod = docs["Deployment"]["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["args"][0] == "exporter"
    given = _check_exporter_args(container["args"][1:])
    host, _, port = str(given["listen"]).rpartition(":")
    assert host == "0.0.0.0"  # reached through the Service, not loopback
    (container_port,) = container["ports"]
    assert container_port["containerPort"] == int(port)
    # The config the args name is the ConfigMap's key, mounted where they say.
    (mount,) = container["volumeMounts"]
    config_path = Path(str(given["config"]))
    assert str(config_path.parent) == mount["mountPath"]
    assert config_path.name in docs["ConfigMap"]["data"]
    # The grace period outlasts the drain, or SIGKILL cuts the probes the drain waits for.
    assert pod["spec"]["terminationGracePeriodSeconds"] > float(given["drain_timeout"])
    assert container["readinessProbe"]["httpGet"]["path"] == "/-/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/-/healthy"
    service = docs["Service"]
    assert service["spec"]["selector"] == pod["metadata"]["labels"]
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] == container_port["name"]
    notes = service["metadata"]["annotations"]
    assert notes["prometheus.io/port"] == port and notes["prometheus.io/path"] == "/metrics"
    monitoring = {d["kind"]: d for d in _documents("monitoring.yaml")}
    assert (
        monitoring["ServiceMonitor"]["spec"]["selector"]["matchLabels"]
        == (service["metadata"]["labels"])
    )
    prober = monitoring["Probe"]["spec"]["prober"]
    assert prober["path"] == "/probe"
    assert prober["url"].endswith(f":{service_port['port']}")


def test_the_kubernetes_config_map_holds_a_config_the_exporter_loads(tmp_path: Path) -> None:
    (config_map,) = [d for d in _documents("exporter.yaml") if d["kind"] == "ConfigMap"]
    path = tmp_path / "exporter.toml"
    path.write_text(config_map["data"]["exporter.toml"])
    done = _run(str(PROMPTPATH), "exporter", "--config", str(path), "--check-config")
    assert done.returncode == 0, done.stderr
    assert "ok, 1 targets, 1 modules" in done.stdout
