"""An eval's report for machines: its JSON (``--json``, a baseline file) and JUnit XML,
which CI systems show as tests.

The JSON holds the record and the results as stored, each scorer's statistics, and the
comparison with a baseline when there is one; ``load_report`` reads it back as a
baseline.

Each case run's scorer is a test case (``<suite>.<case>`` / ``<scorer>``, ``#<repeat>``
when repeated): a failed grade is a ``<failure>`` whose message is the scorer's reason, a
case whose run could not start is an ``<error>``. Text is written by ElementTree, which
escapes it: outputs and reasons are model-written.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from dagwright.errors import InputError
from dagwright.evals.results import CaseResult, EvalReport, Score

if TYPE_CHECKING:
    from dagwright.evals.baselines import Comparison

MAX_MESSAGE_CHARS = 500
MAX_OUTPUT_CHARS = 4000
# Characters XML 1.0 cannot hold, escaped or not: a model's output may have any.
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def xml_text(text: str, limit: int) -> str:
    return NOT_XML.sub("\ufffd", text[:limit])


def junit_xml(report: EvalReport) -> str:
    """The report as a JUnit XML document."""
    record = report.record
    root = ET.Element("testsuites", name=f"dagwright eval {record.id}")
    suite = ET.SubElement(root, "testsuite", name=record.suite, id=record.id)
    tests = failures = errors = 0
    for result in report.results:
        for score in result.scores:
            tests += 1
            case = _testcase(suite, record.suite, result, score, repeated=record.repeat > 1)
            if result.status == "error":
                errors += 1
                _problem(case, "error", result.error or score.reason)
            elif not score.passed:
                failures += 1
                _problem(case, "failure", score.reason)
                ET.SubElement(case, "system-out").text = xml_text(result.output, MAX_OUTPUT_CHARS)
    elapsed = sum(result.duration_s or 0.0 for result in report.results)
    for element in (root, suite):
        element.set("tests", str(tests))
        element.set("failures", str(failures))
        element.set("errors", str(errors))
        element.set("time", f"{elapsed:.3f}")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _testcase(
    parent: ET.Element, suite: str, result: CaseResult, score: Score, *, repeated: bool
) -> ET.Element:
    name = f"{score.scorer}#{result.repeat}" if repeated else score.scorer
    return ET.SubElement(
        parent,
        "testcase",
        classname=f"{suite}.{result.case}",
        name=name,
        time=f"{result.duration_s or 0.0:.3f}",
    )


def _problem(case: ET.Element, tag: str, message: str) -> None:
    line = xml_text(" ".join(message.split()), MAX_MESSAGE_CHARS)
    ET.SubElement(case, tag, message=line).text = xml_text(message, MAX_OUTPUT_CHARS)


def report_json(report: EvalReport, comparison: Comparison | None = None) -> dict[str, Any]:
    """The report as ``--json`` prints it (and ``--baseline FILE`` reads it back)."""
    asked, cached = report.judge_requests()
    return {
        "record": report.record.model_dump(mode="json"),
        "results": [result.model_dump(mode="json") for result in report.results],
        "stats": [
            {**stats.model_dump(mode="json"), "pass_rate": stats.pass_rate}
            for stats in report.stats()
        ],
        "case_stats": {
            case: [
                {**stats.model_dump(mode="json"), "pass_rate": stats.pass_rate}
                for stats in report.case_stats(case)
            ]
            for case in report.record.cases
        },
        "cost_usd": report.total_cost_usd(),
        "judge": {"asked": asked, "cached": cached, "cost_usd": report.judge_cost_usd()},
        "comparison": None if comparison is None else comparison.model_dump(mode="json"),
    }


def load_report(path: Path, *, max_bytes: int) -> EvalReport:
    """A report saved from ``--json``, as a baseline (InputError naming what is wrong)."""
    try:
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)
    except FileNotFoundError:
        raise InputError(f"no such baseline: {path} (an eval id, `latest`, or a file)") from None
    except OSError as exc:
        raise InputError(f"cannot read the baseline {path}: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise InputError(f"the baseline {path} is over {max_bytes} bytes")
    try:
        parsed = json.loads(data)
        return EvalReport.model_validate({"record": parsed["record"], "results": parsed["results"]})
    except (ValueError, KeyError, TypeError, ValidationError):
        raise InputError(
            f"{path} is no eval report: save one with `dagwright eval SUITE --json > FILE`"
        ) from None
