"""Separate OS processes for the stress and crash tests: each opens its own ``AuditService`` on a shared
artifacts directory, like one more MCP server or CLI call would, and reports what it saw on stdout.

``python tests/workers.py submit ROOT RUN_ID RESULTS_DIR PACKET_ID...`` submits prepared results;
``python tests/workers.py drive ROOT AUDITS`` follows the steps of AUDITS whole audits in a row.
Every line is flushed before the next operation starts, so a line printed is a fact the parent may rely on
even when it kills this process right after.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from audit_mcp.usecases.service import AuditService
from tests.conftest import FIXTURES, ScriptedReviewer

CAPS = {"can_dispatch_subagents": True, "max_active_subagents": 4}


def _say(*parts: str) -> None:
    sys.stdout.write(" ".join(parts) + "\n")
    sys.stdout.flush()


def submit(root: str, run_id: str, results_dir: str, packet_ids: list[str]) -> None:
    service = AuditService(Path(root))
    for packet_id in packet_ids:
        results = json.loads((Path(results_dir) / f"{packet_id}.json").read_text())
        receipt = service.submit_packet(run_id, packet_id, results)
        _say(
            "accepted" if receipt.accepted else "refused",
            packet_id,
            "duplicate" if receipt.duplicate else "new",
            str(receipt.findings_kept),
        )


def drive(root: str, audits: int) -> None:
    """A host that never gives up: resumes whatever is in flight and finishes ``audits`` audits."""
    service = AuditService(Path(root))
    reviewer = ScriptedReviewer(json.loads((FIXTURES / "planted_app.answer-key.json").read_text()))
    done = 0
    step = service.next_step(CAPS)
    for _ in range(200):
        if step.step_kind == "present_report":
            done += 1
            _say("complete", str(done))
            if done >= audits:
                return
            step = service.next_step(CAPS, new_audit=True)
            continue
        assert step.step_kind == "dispatch_review", step
        plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
        with service.store.read() as tx:
            submitted = tx.submitted_packet_ids(plan["run_id"])
        for packet in plan["packets"]:
            if packet["packet_id"] in submitted:
                continue
            receipt = service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet))
            _say("accepted" if receipt.accepted else "refused", packet["packet_id"], packet["packet_kind"])
        summary = service.merge_and_ingest(plan["run_id"], [])
        _say("merged", plan["run_id"], str(summary.packets_merged))
        step = service.next_step(CAPS)
    raise SystemExit("the audit did not finish in 200 steps")


if __name__ == "__main__":
    verb, *rest = sys.argv[1:]
    if verb == "submit":
        submit(rest[0], rest[1], rest[2], rest[3:])
    elif verb == "drive":
        drive(rest[0], int(rest[1]))
    else:
        raise SystemExit(f"unknown verb {verb}")
