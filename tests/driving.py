"""Driving a whole audit through ``AuditService``, with a results function standing in for the subagents."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from audit_mcp.models import Step
from audit_mcp.service import AuditService

Answer = Callable[[dict[str, Any]], list[dict[str, Any]]]


def drive(
    service: AuditService, answer: Answer, *, new_audit: bool = False, analyzer_sarif: Sequence[Path] = ()
) -> Step:
    """Follow the steps to the report: answer every packet, merge every run."""
    step = service.next_step({"can_dispatch_subagents": True, "max_active_subagents": 4}, new_audit=new_audit,
                             analyzer_sarif=analyzer_sarif)
    for _ in range(10):
        if step.step_kind != "dispatch_review":
            break
        plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
        for packet in plan["packets"]:
            receipt = service.submit_packet(plan["run_id"], packet["packet_id"], answer(packet))
            assert receipt.accepted, receipt.errors
        service.merge_and_ingest(plan["run_id"], [])
        step = service.next_step({})
    assert step.step_kind == "present_report", step
    return step


def report_json(service: AuditService) -> dict[str, Any]:
    return json.loads(service.report("json"))
