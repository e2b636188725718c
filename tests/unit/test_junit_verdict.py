"""--junit carries the verdict line: the suite's output and property, and each failing
finding's message is the words it leads that line with. Pure: the JSON report in."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from promptpath.report import junit

SAMPLE = Path(__file__).parents[2] / "examples" / "sample-run.json"
LINE = (
    "FAIL buffering: a hop delivers the stream in 3.9 KiB blocks (Via: 1.1 nginx)"
    " — first token after 584 ms"
)


def _report() -> dict[str, Any]:
    body = json.loads(SAMPLE.read_text())
    body.update(ok=False, exit_code=1, headline=LINE)
    body["findings"] = [
        {
            "probe": "buffering",
            "verdict": "fail",
            "summary": "a size-triggered buffer: 3 deliveries of exactly 4012 bytes",
            "lead": "a hop delivers the stream in 3.9 KiB blocks (Via: 1.1 nginx)",
            "evidence": {},
            "advice": ["nginx: proxy_buffering off"],
        }
    ]
    assert isinstance(body, dict)
    return body


def test_the_suite_says_the_verdict_line_and_the_finding_fails_with_its_lead() -> None:
    suite = ET.fromstring(junit.render(_report())).find("testsuite")
    assert suite is not None
    assert suite.findtext("system-out") == LINE
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["headline"] == LINE
    [case] = [c for c in suite.iter("testcase") if c.get("classname") == "probe"]
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message") == LINE.split(" — ")[0]
    # The whole summary and the advice stay in the failure's text.
    assert (failure.text or "").startswith("a size-triggered buffer: 3 deliveries")
    assert "nginx: proxy_buffering off" in (failure.text or "")
