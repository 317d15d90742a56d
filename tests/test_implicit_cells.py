"""Pending cells have no row until they are assigned or answered, and every view counts them alike: status,
explain-task, requeue and the report. An audit planned when every cell was a row resumes after the upgrade."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.core.config import SessionConfig
from tests.conftest import ScriptedReviewer
from tests.driving import cli

NEXT = ("--host-can-dispatch-subagents", "true", "--host-max-active-subagents", "4")


def _db(repo: Path) -> sqlite3.Connection:
    return sqlite3.connect(repo / ".audit-mcp" / "audit.sqlite3")


# Review runs only (no threat model before them, no second opinion after, where the audit has those
# passes): this is about review cells.
REVIEW_ONLY = "".join(
    f"{k} = false\n" for k in ("context_pass", "verification_pass") if k in SessionConfig.model_fields
)


def _first_run_of_one_packet(repo: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    config = repo / ".audit-mcp.toml"
    config.write_text("max_packets_per_run = 1\n" + REVIEW_ONLY)
    code, step = cli(capsys, "next-step", "--root", str(repo), *NEXT)
    assert code == 0 and step["step_kind"] == "dispatch_review", step
    config.write_text(REVIEW_ONLY)  # the later runs take every pending cell
    return dict(json.loads(Path(step["artifact_paths"]["plan"]).read_text()))


def _review_cells(by_lens: dict[str, dict[str, int]]) -> dict[str, int]:
    """Review cells by state, and their total, from coverage by lens (which counts review cells only)."""
    out: dict[str, int] = {"total": 0, "assigned": 0, "pending": 0}
    for by_state in by_lens.values():
        for state, n in by_state.items():
            out[state] = out.get(state, 0) + n
            out["total"] += n
    return out


def _finish(
    repo: Path, reviewer: ScriptedReviewer, capsys: pytest.CaptureFixture[str], plan: dict[str, Any], folder: Path
) -> Any:
    """Answer every packet of every run through submit-packet and merge, until the report; the report's JSON."""
    for _ in range(6):
        for packet in plan["packets"]:
            answer = folder / f"{packet['packet_id']}.json"
            answer.write_text(json.dumps(reviewer.results(packet)))
            code, receipt = cli(
                capsys,
                "submit-packet",
                "--root",
                str(repo),
                "--run-id",
                plan["run_id"],
                "--packet-id",
                packet["packet_id"],
                "--results",
                str(answer),
            )
            assert code == 0 and receipt["accepted"], receipt
        cli(capsys, "merge-and-ingest", "--root", str(repo), "--run-id", plan["run_id"])
        _, step = cli(capsys, "next-step", "--root", str(repo), *NEXT)
        if step["step_kind"] != "dispatch_review":
            break
        plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    assert step["step_kind"] == "present_report", step
    _, report = cli(capsys, "report", "--root", str(repo), "--format", "json")
    return report


def test_pending_cells_have_no_row_and_status_explain_task_and_requeue_see_them(
    repo: Path, reviewer: ScriptedReviewer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plan = _first_run_of_one_packet(repo, capsys)
    handed_out = {t["task_id"] for p in plan["packets"] for t in p["tasks"]}
    with _db(repo) as db:
        rows = {r[0] for r in db.execute("SELECT task_id FROM cells WHERE kind = 'review'")}
    assert rows == handed_out  # the cells of the run have rows; every other review cell is implied

    _, status = cli(capsys, "status", "--root", str(repo), "--json")
    review = _review_cells(status["coverage_by_lens"])
    assert review["assigned"] == len(handed_out) and review["pending"] > 0
    assert review["total"] == review["assigned"] + review["pending"]

    last = f"T{review['total']:05d}"  # review cells are numbered 1..total: the last one waits in the queue
    assert last not in handed_out
    code, told = cli(capsys, "explain-task", "--root", str(repo), last)
    assert code == 0, told
    assert told["state"] == "pending" and told["attempts"] == 0 and told["packets"] == []
    assert told["file"] and told["lens"] in status["coverage_by_lens"]

    code, result = cli(
        capsys, "requeue", "--root", str(repo), "--task", last, "--reason", "the parser changed; read it"
    )
    assert code == 0, result
    assert result["already_pending"] == [last] and not result["not_requeued"]

    report = _finish(repo, reviewer, capsys, plan, tmp_path)
    assert report["completeness"] == "complete"
    assert _review_cells(report["coverage"]["by_lens"])["total"] == review["total"]
    with _db(repo) as db:
        answered = db.execute("SELECT COUNT(*) FROM cells WHERE kind = 'review'").fetchone()[0]
    assert answered == review["total"]  # every answered cell has its row


def _as_before_units(repo: Path) -> None:
    """Rewrite the database as the schema before implied cells left it: every cell a row, no units."""
    with _db(repo) as db:
        sets: dict[int, list[str]] = {}
        for index, lens in db.execute("SELECT lens_set, lens FROM lens_sets ORDER BY lens_set, ord"):
            sets.setdefault(index, []).append(lens)
        have = {r[0] for r in db.execute("SELECT task_id FROM cells")}
        rows = []
        for audit, first, path, start, end, digest, index in db.execute(
            "SELECT audit_id, first_task, path, start_line, end_line, content_hash, lens_set FROM units"
        ):
            for k, lens in enumerate(sets[index]):
                task = f"T{first + k:05d}"
                if task not in have:
                    rows.append((audit, task, path, start, end, lens, digest))
        assert rows
        db.executemany(
            "INSERT INTO cells (audit_id, task_id, path, start_line, end_line, lens, state, attempts, content_hash,"
            " updated_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, '2026-01-01T00:00:00Z')",
            rows,
        )
        db.execute("DROP TABLE units")
        db.execute("DROP TABLE lens_sets")
        db.execute("DROP INDEX cells_unit")
        db.execute("ALTER TABLE cells DROP COLUMN unit")
        db.execute("CREATE INDEX cells_queue ON cells (audit_id, state, path, start_line, end_line, lens)")
        db.execute("DELETE FROM migrations WHERE name = '0012_implicit_cells'")


def test_an_audit_planned_when_every_cell_was_a_row_resumes_after_the_upgrade(
    repo: Path, reviewer: ScriptedReviewer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plan = _first_run_of_one_packet(repo, capsys)
    _, before = cli(capsys, "status", "--root", str(repo), "--json")
    _as_before_units(repo)

    _, after = cli(capsys, "status", "--root", str(repo), "--json")  # opening the store migrates it
    assert after["coverage"] == before["coverage"] and after["coverage_by_lens"] == before["coverage_by_lens"]
    with _db(repo) as db:
        assert db.execute("SELECT COUNT(*) FROM migrations WHERE name = '0012_implicit_cells'").fetchone()[0] == 1
        assert db.execute("SELECT COUNT(*) FROM units").fetchone()[0] == 0  # the audit's own rows stay the truth
        rows = db.execute("SELECT COUNT(*) FROM cells WHERE kind = 'review'").fetchone()[0]
    total = _review_cells(before["coverage_by_lens"])["total"]
    assert rows == total
    last = f"T{total:05d}"
    _, told = cli(capsys, "explain-task", "--root", str(repo), last)
    assert told["state"] == "pending" and told["attempts"] == 0

    report = _finish(repo, reviewer, capsys, plan, tmp_path)
    assert report["completeness"] == "complete" and _review_cells(report["coverage"]["by_lens"])["total"] == total
