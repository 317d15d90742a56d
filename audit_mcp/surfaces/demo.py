"""The demo: a whole audit of the bundled fixture, reviewed by a scripted reviewer, in seconds.

The reviewer is not a model. It replays the fixture's answer key (the defects
planted in it on purpose) and marks every other task as read, so the demo
shows the orchestration (intake, planning, packets, waves, validation, merge,
report) and nothing about any model's judgement.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from audit_mcp.core.errors import ConfigError
from audit_mcp.scheduling.learned import STATE_FILENAME, LearnedStore
from audit_mcp.surfaces.scripted import AnswerKeyReviewer
from audit_mcp.usecases.service import AuditService
from audit_mcp.usecases.workspace import ARTIFACTS_DIRNAME

FIXTURE_NAME = "planted_app"
REVIEWER_LABEL = (
    "scripted reviewer (replays the fixture's answer key: its threat model, planted defects, decoys and "
    "verdicts; no model judged this code)"
)

Say = Callable[[str], None]


@cache
def fixtures_dir() -> Path:
    """``fixtures/`` inside the installed wheel, or beside the package in a source checkout."""
    package = Path(__file__).resolve().parents[1]  # audit_mcp/
    for candidate in (package / "fixtures", package.parent / "fixtures"):
        if (candidate / FIXTURE_NAME).is_dir():
            return candidate
    raise ConfigError("the bundled fixture is missing from this installation; reinstall audit-mcp")


def answer_key() -> dict[str, Any]:
    key: dict[str, Any] = json.loads((fixtures_dir() / f"{FIXTURE_NAME}.answer-key.json").read_text(encoding="utf-8"))
    return key


@dataclass(frozen=True)
class DemoResult:
    root: Path
    report_path: Path
    report_json_path: Path
    completeness: str
    runs: int
    packets: int
    findings: int


def copy_fixture(into: Path | None) -> Path:
    """A fresh copy of the bundled fixture under ``into`` (a new temporary directory by default)."""
    parent = Path(into).expanduser().resolve() if into else Path(tempfile.mkdtemp(prefix="audit-mcp-demo-"))
    target = parent / FIXTURE_NAME
    if target.exists():
        raise ConfigError(f"{target} already exists; pass --dir with an empty or new folder")
    parent.mkdir(parents=True, exist_ok=True)
    # An earlier audit of the bundled fixture itself (its artifacts directory) never comes along.
    shutil.copytree(fixtures_dir() / FIXTURE_NAME, target, ignore=shutil.ignore_patterns(ARTIFACTS_DIRNAME))
    return target


def run_demo(into: Path | None, say: Say, *, max_runs: int = 10) -> DemoResult:
    root = copy_fixture(into)
    say(f"reviewer: {REVIEWER_LABEL}")
    say(f"repository: {root} (a copy of the bundled fixture)")
    # The demo learns nothing about the user's model limits: its own learned state, in its own folder.
    service = AuditService(root, learned=LearnedStore(root / ARTIFACTS_DIRNAME / STATE_FILENAME))
    say(f"learned rate-limit state: {service.learned.path} (the demo's own; yours is left alone)")
    reviewer = AnswerKeyReviewer(answer_key())
    step = service.next_step({"can_dispatch_subagents": True, "max_active_subagents": 4}, client_name="audit-mcp-demo")
    service.declare_scripted_reviewer(REVIEWER_LABEL)
    runs = packets = 0
    while step.step_kind == "dispatch_review" and runs < max_runs:
        plan = json.loads(service.plan_path(step.run_id or "").read_text(encoding="utf-8"))
        runs += 1
        say(f"run {plan['run_id']}: {len(plan['packets'])} packet(s) in waves {plan['waves']}")
        for packet in plan["packets"]:
            receipt = service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet))
            if not receipt.accepted:
                raise ConfigError(
                    f"the scripted review of {packet['packet_id']} was refused: {receipt.errors[0].message}"
                )
            packets += 1
            say(
                f"  {packet['packet_id']}: {len(packet['tasks'])} task(s), {receipt.findings_kept} finding(s), accepted"
            )
        summary = service.merge_and_ingest(plan["run_id"])
        say(f"  merged: {summary.tasks_covered} task(s) covered, completeness {summary.completeness}")
        step = service.next_step(client_name="audit-mcp-demo")
    if step.step_kind != "present_report":
        raise ConfigError(f"the demo stopped at a {step.step_kind} step: {step.reason}")
    report = json.loads(service.report("json"))
    return DemoResult(
        root=root,
        report_path=service.report_md_path,
        report_json_path=service.report_json_path,
        completeness=report["completeness"],
        runs=runs,
        packets=packets,
        findings=len(report["findings"]),
    )
