"""What a merge needs of each accepted submission is kept beside it when it is accepted: the merge reads
task ids and the few results with more to record, and gives the same matrix as merging the whole payload."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from audit_mcp.engine.ingest import merge_parts
from audit_mcp.store.records import CellKind
from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer
from tests.driving import first_review


def _varied(reviewer: ScriptedReviewer, packet: dict[str, Any]) -> list[dict[str, Any]]:
    """The reviewer's honest answers, with one task of each other kind of result among them."""
    results = reviewer.results(packet)
    plain = [r for r in results if not r.get("findings")]
    assert len(plain) >= 3, "the fixture's first packet must hold three tasks without findings"
    plain[0].update(status="could_not_review", reason="the file was truncated in my context")
    plain[1].update(status="not_applicable", reason="generated code with no inputs")
    plain[2]["reason"] = "read twice: the parser and its caller"
    return results


def _untagged(packet_id: str | None) -> str:
    """A packet id without its artifacts directory's tag (``A1-R2-1a2b3c-P01`` is ``A1-R2-P01``)."""
    return re.sub(r"-[0-9a-f]{6}-", "-", packet_id or "")


def _merged(repo: Path, reviewer: ScriptedReviewer, *, payload_only: bool) -> dict[str, Any]:
    """Review the first run (one packet with every kind of result), merge it, and return what a user sees:
    each cell by file, lines and lens, the findings, and the merge's summary, without the run's own ids."""
    service = AuditService(repo)
    plan = json.loads(Path(first_review(service).artifact_paths["plan"]).read_text())
    for n, packet in enumerate(plan["packets"]):
        results = _varied(reviewer, packet) if n == 0 else reviewer.results(packet)
        assert service.submit_packet(plan["run_id"], packet["packet_id"], results).accepted
    if payload_only:  # as a submission accepted before merge parts were kept
        conn = sqlite3.connect(service.artifacts_dir / "audit.sqlite3")
        with conn:
            assert conn.execute("UPDATE submissions SET parts = NULL WHERE parts IS NOT NULL").rowcount
        conn.close()
    summary = service.merge_and_ingest(plan["run_id"], [])
    with service.store.read() as tx:
        audit = tx.current_audit()
        assert audit is not None
        cells = sorted(
            (c.path, c.start_line, c.lens, c.kind, c.state, c.attempts, c.reason, _untagged(c.packet_id))
            for c in tx.cells(audit.audit_id)
        )
        findings = [
            json.dumps({k: v for k, v in f.items() if k not in ("run_id", "packet_id")}, sort_keys=True)
            for f in tx.findings(audit.audit_id)
        ]
    service.store.close()
    shown = summary.model_dump(exclude={"run_id"})
    shown["requeued"] = sorted((r.file, r.lens, r.why, r.state) for r in summary.requeued)
    return {"cells": cells, "findings": findings, "summary": shown}


def test_a_run_merges_alike_from_its_kept_parts_and_from_whole_payloads(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    shutil.copytree(repo, other)
    kept = _merged(repo, reviewer, payload_only=False)
    whole = _merged(other, reviewer, payload_only=True)
    assert kept == whole
    states = {c[4] for c in kept["cells"]}
    assert {"reviewed", "not_applicable", "pending"} <= states  # the varied packet's answers all landed
    assert any(c[6] == "read twice: the parser and its caller" and c[4] == "reviewed" for c in kept["cells"])
    assert kept["findings"], "the fixture plants findings in the first run"
    assert kept["summary"]["tasks_requeued"] == 1


def test_only_review_tasks_reviewed_with_nothing_more_to_record_are_kept_as_bare_ids() -> None:
    results = [
        {"task_id": "T1", "status": "reviewed", "summary": "read"},
        {"task_id": "T2", "status": "reviewed", "summary": "read", "reason": "twice"},
        {"task_id": "T3", "status": "reviewed", "summary": "read", "findings": [{"title": "x"}]},
        {"task_id": "T4", "status": "reviewed", "summary": "read", "leads": [{"lead_id": "L1"}]},
        {"task_id": "T5", "status": "not_applicable", "reason": "generated"},
        {"task_id": "T6", "status": "could_not_review", "reason": "too long"},
        {"task_id": "C1", "status": "reviewed", "summary": "the model", "threat_model": {"assets": []}},
        {"task_id": "V1", "status": "reviewed", "summary": "checked"},
        {"task_id": "T7", "status": "reviewed", "summary": "read", "findings": []},
    ]
    kinds = {r["task_id"]: CellKind.REVIEW.value for r in results}
    kinds.update(C1=CellKind.CONTEXT.value, V1=CellKind.VERIFY.value)
    parts = merge_parts(results, {"input_tokens": 10}, kinds, ["b.py", "a.py", "b.py"])
    assert parts["reviewed"] == ["T1", "T7"]
    assert [r["task_id"] for r in parts["results"]] == ["T2", "T3", "T4", "T5", "T6", "C1", "V1"]
    assert parts["usage"] == {"input_tokens": 10} and parts["files"] == ["a.py", "b.py"]
    # A payload stored without parts reads as parts with every result whole.
    assert merge_parts(results, None, {}, [])["reviewed"] == []
