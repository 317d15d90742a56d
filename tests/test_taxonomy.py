"""Categories are filed under a closed taxonomy: CWE ids, or a fixed class list the lens prompts name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from audit_mcp.core.cwe import CWE_NAMES
from audit_mcp.core.taxonomy import CLASSES, classify, describe, lens_class
from audit_mcp.findings.sarif import MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS
from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer
from tests.driving import first_review

PROMPTS = Path(__file__).resolve().parent.parent / "prompts" / "lenses"


@pytest.mark.parametrize(
    ("text", "lens", "expected", "basis"),
    [
        ("CWE-89", "security", "CWE-89", "cwe"),
        ("sql injection (cwe_089)", "security", "CWE-89", "cwe"),
        ("SQL injection via an f-string", "security", "CWE-89", "wording"),
        ("sqli", "security", "CWE-89", "class"),
        ("NoSQL injection in the filter", "security", "CWE-943", "wording"),
        ("off-by-one", "correctness", "CWE-193", "class"),
        ("Off by one in pagination", "correctness", "CWE-193", "wording"),
        ("race condition", "concurrency", "CWE-362", "class"),
        ("N+1 query", "performance", "n-plus-one", "wording"),
        ("n-plus-one", "performance", "n-plus-one", "class"),
        ("magic-value in retry loop", "maintainability", "magic-value", "wording"),
        ("something odd", "performance", "other-performance", "lens"),
        ("  ", "error_handling", "other-error-handling", "lens"),
        ("CWE-99999", "security", "other-security", "lens"),
    ],
    ids=lambda v: str(v),
)
def test_free_text_is_filed_under_one_taxonomy_id(text: str, lens: str, expected: str, basis: str) -> None:
    filed = classify(text, lens)
    assert (filed.category_id, filed.basis) == (expected, basis)


def _named_in(prompt: str) -> list[str]:
    section = prompt.split("## Category", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"`([A-Za-z0-9-]+)`", section)


@pytest.mark.parametrize("lens_file", sorted(PROMPTS.glob("*.md")), ids=lambda p: p.stem)
def test_every_category_a_lens_prompt_names_is_in_the_taxonomy(lens_file: Path) -> None:
    named = [n for n in _named_in(lens_file.read_text()) if n != "category"]
    assert named, f"{lens_file.name} names no categories"
    for name in named:
        filed = classify(name, lens_file.stem)
        assert filed.basis in ("cwe", "class"), f"{lens_file.name} names `{name}`, which the taxonomy lacks"


def test_every_entry_has_a_name_and_description_within_github_s_limits() -> None:
    ids = [f"CWE-{n}" for n in CWE_NAMES] + list(CLASSES) + [lens_class("error_handling"), "CWE-1234"]
    for category_id in ids:
        entry = describe(category_id)
        assert entry.name and entry.description.endswith(".")
        assert len(entry.name) <= MAX_NAME_CHARS and len(entry.description) <= MAX_DESCRIPTION_CHARS
        assert (entry.cwe is not None) == category_id.startswith("CWE-")


def test_a_category_that_names_nothing_is_accepted_filed_under_the_lens_and_warned_about(
    repo: Path, answer_key: dict[str, object]
) -> None:
    issues = [dict(i) | {"category": "looks wrong to me"} for i in answer_key["issues"]]  # type: ignore[attr-defined]
    service = AuditService(repo)
    plan = json.loads(Path(first_review(service).artifact_paths["plan"]).read_text())
    reviewer = ScriptedReviewer({"issues": issues})
    receipts = [service.submit_packet(plan["run_id"], p["packet_id"], reviewer.results(p)) for p in plan["packets"]]
    assert all(r.accepted for r in receipts)
    warnings = [w for r in receipts for w in r.warnings if w.location.endswith("/category")]
    assert len(warnings) == len(issues)
    assert all("is filed as 'other-" in w.message and "give a CWE id" in w.message for w in warnings)
    service.merge_and_ingest(plan["run_id"])
    findings = json.loads(service.report("json"))["findings"]
    assert {f["category_id"] for f in findings} == {lens_class(i["lens"]) for i in issues}  # type: ignore[index]
    assert {f["category"] for f in findings} == {"looks wrong to me"}
