"""The JSON report follows its published JSON Schema, for a first audit and for a compared one."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from audit_mcp.usecases.service import AuditService
from tests.conftest import FIXTURES, ScriptedReviewer
from tests.driving import drive, judging_with_second_lens, report_json
from tests.test_comparison import _fix_sqli_and_plant_a_new_issue


def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(resources.files("audit_mcp").joinpath("schemas/report.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(doc: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in _validator().iter_errors(doc)]


def test_reports_with_leads_duplicates_and_a_comparison_follow_the_published_schema(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service = AuditService(repo)
    drive(service, judging_with_second_lens(reviewer), analyzer_sarif=[FIXTURES / "planted_app.bandit.sarif"])
    first = report_json(service)
    assert first["leads"] and first["comparison"] is None
    assert _errors(first) == []

    later = _fix_sqli_and_plant_a_new_issue(repo, reviewer.issues)
    drive(service, ScriptedReviewer({"issues": later}).results, new_audit=True)
    second = report_json(service)
    assert second["comparison"]["counts"]["resolved"] == 1
    assert _errors(second) == []

    del second["findings"][0]["fingerprint"]
    second["leads"] = [{"lead_id": "L001"}]
    problems = "\n".join(_errors(second))
    assert "'fingerprint' is a required property" in problems and "'tool' is a required property" in problems
