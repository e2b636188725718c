"""--junit: the run as JUnit XML, in the dialect GitLab, Jenkins and GitHub reporters read.

A pure renderer over the JSON report (a single-run object or a ``promptpath.series/1``
object). One ``<testsuite>`` per target; in it a test case per stage (per run, for a
series), per SLO entry and per probe finding. The stage a run failed in is a
``<failure>`` carrying the error's message, so a CI page shows where the path broke; a
finding's ``<failure>`` message is the words it leads the verdict line with, and the
verdict line itself is the suite's ``<system-out>`` and its ``headline`` property.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from typing import Any

from promptpath.report.runs import is_series, runs_of, target_of

#: Characters XML 1.0 cannot carry at all, even escaped (a server's error body may hold them).
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: object) -> str:
    return _NOT_XML.sub("\ufffd", str(value))


def _seconds(ms: object) -> str:
    return f"{float(ms) / 1000:.6f}" if isinstance(ms, (int, float)) else "0"


def _case(classname: str, name: str, ms: object = None) -> ET.Element:
    return ET.Element(
        "testcase", {"classname": _text(classname), "name": _text(name), "time": _seconds(ms)}
    )


def _fail(case: ET.Element, tag: str, message: str, kind: str, detail: str = "") -> None:
    outcome = ET.SubElement(case, tag, {"message": _text(message), "type": _text(kind)})
    outcome.text = _text(detail or message)


def _stage_cases(run: Mapping[str, Any], classname: str) -> Iterator[ET.Element]:
    """A case per stage the run went through; the stage it failed in is a failure."""
    stages: Mapping[str, float] = run.get("stages_ms") or {}
    error: Mapping[str, Any] | None = run.get("error")
    failed_stage = error.get("stage") if error else None
    for name, ms in stages.items():
        case = _case(classname, name, ms)
        if name == failed_stage and error is not None:
            _fail(case, "failure", str(error.get("message")), str(error.get("kind")))
        yield case
    if error is not None and failed_stage not in stages:
        # Stages that never finished have no duration (a refused connect, a status error).
        case = _case(classname, str(failed_stage))
        _fail(case, "failure", str(error.get("message")), str(error.get("kind")))
        yield case


def _slo_cases(entries: list[Mapping[str, Any]]) -> Iterator[ET.Element]:
    for slo in entries:
        case = _case("slo", str(slo.get("expr")))
        if not slo.get("ok"):
            message = (
                f"{slo.get('metric')} = {slo.get('value')}, wanted"
                f" {slo.get('op')} {slo.get('threshold')} ({slo.get('expr')})"
            )
            _fail(case, "failure", message, "slo_breached")
        yield case


def _finding_cases(
    findings: list[Mapping[str, Any]], classname: str, *, fail_on: str
) -> Iterator[ET.Element]:
    for finding in findings:
        case = _case(classname, str(finding.get("probe")))
        verdict = str(finding.get("verdict"))
        summary = str(finding.get("summary", ""))
        detail = "\n".join([summary, *(str(a) for a in finding.get("advice") or [])])
        # The message a CI page lists: the finding as the verdict line leads with it.
        lead = finding.get("lead")
        message = f"{verdict.upper()} {finding.get('probe')}: {lead}" if lead else summary
        if verdict == "fail" or (verdict == "warn" and fail_on == "warn"):
            _fail(case, "failure", message, verdict, detail)
        elif verdict == "error":
            _fail(case, "error", message, verdict, detail)
        elif verdict == "skip":
            ET.SubElement(case, "skipped", {"message": _text(summary)})
        else:
            ET.SubElement(case, "system-out").text = _text(f"{verdict}: {detail}")
        yield case


def _suite(report: Mapping[str, Any], *, fail_on: str) -> ET.Element:
    runs = runs_of(report)
    series = is_series(report)
    cases: list[ET.Element] = []
    for index, run in enumerate(runs):
        prefix = f"run {index + 1}." if series else ""
        cases.extend(_stage_cases(run, f"{prefix}stage"))
        if run.get("warm"):
            cases.extend(_stage_cases(run["warm"], f"{prefix}warm.stage"))
        cases.extend(_finding_cases(run.get("findings") or [], f"{prefix}probe", fail_on=fail_on))
    cases.extend(_slo_cases(report.get("slo") or []))
    first = runs[0] if runs else {}
    suite = ET.Element(
        "testsuite",
        {
            "name": _text(target_of(report)),
            "tests": str(len(cases)),
            "failures": str(sum(c.find("failure") is not None for c in cases)),
            "errors": str(sum(c.find("error") is not None for c in cases)),
            "skipped": str(sum(c.find("skipped") is not None for c in cases)),
            "time": _seconds(sum(_end_ms(run) for run in runs)),
        },
    )
    if first.get("started_at"):
        suite.set("timestamp", _text(first["started_at"]))
    headline = str(report.get("headline") or "")
    properties = ET.SubElement(suite, "properties")
    facts: list[tuple[str, object]] = [("exit_code", report.get("exit_code")), ("runs", len(runs))]
    if headline:
        facts.append(("headline", headline))
    for name, value in facts:
        ET.SubElement(properties, "property", {"name": name, "value": _text(value)})
    suite.extend(cases)
    if headline:
        # The verdict line, what is wrong first, as the suite's output a CI page shows.
        ET.SubElement(suite, "system-out").text = _text(headline)
    return suite


def _end_ms(run: Mapping[str, Any]) -> float:
    end = (run.get("milestones_ms") or {}).get("end")
    if isinstance(end, (int, float)):
        return float(end)
    return float(sum((run.get("stages_ms") or {}).values()))


def render(report: Mapping[str, Any], *, fail_on: str = "fail") -> str:
    """JUnit XML text of ``report``; ``fail_on`` as for the run (warn: a warning fails)."""
    suite = _suite(report, fail_on=fail_on)
    root = ET.Element(
        "testsuites",
        {
            "name": "promptpath",
            **{k: suite.attrib[k] for k in ("tests", "failures", "errors", "skipped", "time")},
        },
    )
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
