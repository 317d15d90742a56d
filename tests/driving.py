"""Driving a whole audit through ``AuditService``, with a results function standing in for the subagents."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.core.models import Step
from audit_mcp.surfaces.cli import main
from audit_mcp.usecases import artifacts as artifacts_folder
from audit_mcp.usecases.service import AuditService
from tests.conftest import FIXTURES, ScriptedReviewer

Answer = Callable[[dict[str, Any]], list[dict[str, Any]]]


def run_id(repo: Path, audit: int = 1, run: int = 1, artifacts: Path | None = None) -> str:
    """The id the audit gives run ``run`` of audit ``audit`` in ``repo``: the tag of its artifacts directory's
    random binding included (made here, as the audit would, when the directory does not exist yet)."""
    chosen = artifacts_folder.choose(repo.resolve(), artifacts.resolve() if artifacts else None)
    return f"A{audit}-R{run}-{artifacts_folder.run_tag(artifacts_folder.ensure(chosen))}"


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    """Run one ``audit-mcp`` verb in-process: its exit code and its output, parsed when it is JSON."""
    code = main(list(argv))
    out = capsys.readouterr().out
    try:
        return code, json.loads(out)
    except json.JSONDecodeError:
        return code, out


def opinions() -> ScriptedReviewer:
    """The scripted answers for context and verification packets: a threat model that names only the root (so it
    fits any repository), the fixture's planted defects confirmed, anything else judged likely."""
    key = json.loads((FIXTURES / "planted_app.answer-key.json").read_text())
    key.pop("context")
    return ScriptedReviewer(key)


def answer_all(answer: Answer) -> Answer:
    """``answer`` for review packets; the scripted context and verifier answers for the other kinds."""
    scripted = opinions()

    def answering(packet: dict[str, Any]) -> list[dict[str, Any]]:
        return answer(packet) if packet.get("packet_kind", "review") == "review" else scripted.results(packet)

    return answering


def read_launch_lists(service: AuditService, step: Step) -> Step:
    """Read every wave's launch list of the step's run, as a host does before launching each wave: the packet
    prompts of a wave are written by then (dispatch writes only the first two waves')."""
    if step.step_kind == "dispatch_review" and step.run_id is not None:
        plan = json.loads(service.plan_path(step.run_id).read_text())
        for wave in range(1, len(plan["waves"]) + 1):
            service.plan_view(step.run_id, wave=wave)
    return step


def past(service: AuditService, step: Step, kind: str) -> Step:
    """When ``step`` hands out packets of ``kind`` (context, verify), answer them (scripted), merge, and return
    the next step; any other step is returned as it is."""
    if step.step_kind not in ("dispatch_review", "single_task_fallback") or step.run_id is None:
        return step
    plan = json.loads(service.plan_path(step.run_id).read_text())
    if plan.get("packet_kind") != kind:
        return step
    submitted = service.submitted_packets(plan["run_id"])
    for packet in plan["packets"]:
        if packet["packet_id"] not in submitted:
            receipt = service.submit_packet(plan["run_id"], packet["packet_id"], opinions().results(packet))
            assert receipt.accepted, receipt.errors
    service.merge_and_ingest(plan["run_id"], [])
    return read_launch_lists(service, service.next_step({}))


def past_context(service: AuditService, step: Step) -> Step:
    """When ``step`` hands out the context packet, answer it (scripted), merge, and return the next step."""
    return past(service, step, "context")


async def call_ok(client: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Call an MCP tool that must succeed: its structured result."""
    result = await client.call_tool(name, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


async def first_review_over_mcp(client: Any, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """Over an MCP client: the first step that hands out review packets (the context run answered first)."""
    step: dict[str, Any] = (
        await client.call_tool("next_step", arguments or {"host_can_dispatch_subagents": True})
    ).structured_content
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text()) if step.get("run_id") else {}
    if plan.get("packet_kind") != "context":
        return step
    for packet in plan["packets"]:
        receipt = await client.call_tool(
            "submit_packet",
            {"run_id": plan["run_id"], "packet_id": packet["packet_id"], "results": opinions().results(packet)},
        )
        assert receipt.structured_content["accepted"], receipt.structured_content
    await client.call_tool("merge_and_ingest", {"run_id": plan["run_id"]})
    following: dict[str, Any] = (await client.call_tool("next_step", {})).structured_content
    return following


def past_context_json(root: Path, step: dict[str, Any]) -> dict[str, Any]:
    """``past_context`` for a step printed by the CLI (as JSON): answered in-process, the next step as JSON."""
    following = past_context(AuditService(root), Step.model_validate(step))
    return json.loads(following.model_dump_json())


def first_review(service: AuditService, capabilities: dict[str, Any] | None = None, **options: Any) -> Step:
    """The first step that hands out review packets: the context run (if any) answered and merged first."""
    step = service.next_step(capabilities or {"can_dispatch_subagents": True}, **options)
    return read_launch_lists(service, past_context(service, step))


def finish(service: AuditService, step: Step | None = None, answer: Answer | None = None) -> Step:
    """Answer every run still to come (``answer`` the review packets, the scripted answers the rest) and
    return the step after the last one: the report, or whatever stopped the loop."""
    respond = answer_all(answer or opinions().results)
    step = step or service.next_step({})
    for _ in range(12):
        if step.step_kind != "dispatch_review" or step.run_id is None:
            break
        read_launch_lists(service, step)
        plan = json.loads(service.plan_path(step.run_id).read_text())
        submitted = service.submitted_packets(plan["run_id"])
        for packet in plan["packets"]:
            if packet["packet_id"] not in submitted:
                receipt = service.submit_packet(plan["run_id"], packet["packet_id"], respond(packet))
                assert receipt.accepted, receipt.errors
        service.merge_and_ingest(plan["run_id"], [])
        step = service.next_step({})
    return step


def drive(
    service: AuditService, answer: Answer, *, new_audit: bool = False, analyzer_sarif: Sequence[Path] = ()
) -> Step:
    """Follow the steps to the report: answer every packet (``answer`` the review ones), merge every run."""
    respond = answer_all(answer)
    step = service.next_step(
        {"can_dispatch_subagents": True, "max_active_subagents": 4}, new_audit=new_audit, analyzer_sarif=analyzer_sarif
    )
    for _ in range(12):
        if step.step_kind != "dispatch_review":
            break
        read_launch_lists(service, step)
        plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
        for packet in plan["packets"]:
            receipt = service.submit_packet(plan["run_id"], packet["packet_id"], respond(packet))
            assert receipt.accepted, receipt.errors
        service.merge_and_ingest(plan["run_id"], [])
        step = service.next_step({})
    assert step.step_kind == "present_report", step
    return step


def report_json(service: AuditService) -> dict[str, Any]:
    return json.loads(service.report("json"))


_LEAD_ROW = re.compile(r"^\| (L\d{3}) \| (.+?) \| `([^`:]+):(\d+)(?:-\d+)?` \| (.*) \|$", re.M)


def carried(prompt: str) -> dict[str, tuple[str, int, str]]:
    """What a reviewer reads in its prompt: lead id -> (file, line, tool and rule)."""
    return {m[1]: (m[3], int(m[4]), m[2]) for m in _LEAD_ROW.finditer(prompt)}


def judging(reviewer: ScriptedReviewer, prompt: str, packet: dict[str, Any]) -> list[dict[str, Any]]:
    """The scripted reviewer, judging every lead: confirmed where it reports a finding, refuted elsewhere."""
    results = reviewer.results(packet)
    tasks = {t["task_id"]: t for t in packet["tasks"]}
    for lead_id, (file, line, _rule) in carried(prompt).items():
        result = next(r for r in results if tasks[r["task_id"]]["file"] == file)
        hit = any(
            f["file"] == file and f["start_line"] - 2 <= line <= f["end_line"] for r in results for f in r["findings"]
        )
        result.setdefault("leads", []).append(
            {
                "lead_id": lead_id,
                "verdict": "confirmed" if hit else "refuted",
                "reason": "the flagged code is the defect reported here" if hit else "the value never reaches a sink",
            }
        )
    return results


def with_second_lens(reviewer: ScriptedReviewer) -> Answer:
    """The scripted reviewer, plus a correctness reviewer that reports the SQL injection under its own name."""
    sqli = next(i for i in reviewer.issues if i["id"] == "sqli-user-lookup")

    def answer(packet: dict[str, Any]) -> list[dict[str, Any]]:
        results = reviewer.results(packet)
        for task, result in zip(packet["tasks"], results, strict=True):
            if task["file"] == "app/db.py" and task["lens"] == "correctness":
                extra = {
                    k: sqli[k]
                    for k in (
                        "confidence",
                        "file",
                        "start_line",
                        "end_line",
                        "evidence",
                        "description",
                        "recommendation",
                    )
                }
                result["findings"].append(
                    extra
                    | {
                        "title": "Username interpolated into SQL text",
                        "category": "query-construction",
                        "severity": "high",
                    }
                )
        return results

    return answer


def judging_with_second_lens(reviewer: ScriptedReviewer) -> Answer:
    """Both of the above: a second lens reporting the SQL injection, and a verdict on every carried lead."""
    two_lenses = with_second_lens(reviewer)

    def answer(packet: dict[str, Any]) -> list[dict[str, Any]]:
        judged = {
            r["task_id"]: r.get("leads") for r in judging(reviewer, Path(packet["prompt_path"]).read_text(), packet)
        }
        results = two_lenses(packet)
        for result in results:
            if judged.get(result["task_id"]):
                result["leads"] = judged[result["task_id"]]
        return results

    return answer
