"""The queue read unit by unit is the queue read cell by cell, and packing its units makes the same packets
as packing its cells: on a repository with chunked files, import neighbours and several lens sets, after a
run took some units whole and some in part and a requeued cell came back as a row, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

from audit_mcp.engine.batching import head_of_queue
from audit_mcp.engine.packets import group_cells, pack, pack_units
from audit_mcp.store.records import CellKind, CellState
from audit_mcp.usecases.service import AuditService
from tests.conftest import git
from tests.test_implicit_cells import REVIEW_ONLY


def _repository(root: Path) -> None:
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for i in range(12):
        (pkg / f"m{i:02d}.py").write_text(
            f"from pkg import m{(i + 1) % 12:02d}\nimport os\n\n\ndef run_{i}(path):\n"
            f"    return open(os.path.join('/srv', path)).read() + str(m{(i + 1) % 12:02d})\n"
        )
    # Past the chunk threshold: a file reviewed as line ranges.
    (pkg / "tables.py").write_text("".join(f"def table_{k}(v):\n    return v * {k}\n\n" for k in range(1_400)))
    tests = root / "tests"
    tests.mkdir()
    (tests / "test_m00.py").write_text("from pkg.m00 import run_0\n\n\ndef test_run():\n    assert run_0\n")
    (root / "settings.yaml").write_text("debug: true\nsecret_key: changeme\n")
    (root / "Dockerfile").write_text("FROM python:3.12\nUSER root\nCOPY . /app\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "fixture")


def _answer(packet: dict[str, object], unreviewed: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i, task in enumerate(packet["tasks"]):  # type: ignore[attr-defined]
        result = {"task_id": task["task_id"], "status": "reviewed", "findings": [], "summary": "Read it all; fine."}
        if i < unreviewed:
            result.update(status="could_not_review", reason="ran out of budget")
        out.append(result)
    return out


def test_packing_from_units_is_packing_from_cells(tmp_path: Path, store_url: str) -> None:
    root = tmp_path / "repo"
    _repository(root)
    (root / ".audit-mcp.toml").write_text("max_packet_tokens = 4000\nmax_packets_per_run = 3\n" + REVIEW_ONLY)
    service = AuditService(root)
    step = service.next_step({"can_dispatch_subagents": True})
    assert step.step_kind == "dispatch_review", step.step_kind
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    first = plan["packets"][0]
    receipt = service.submit_packet(plan["run_id"], first["packet_id"], _answer(first, 1))
    assert receipt.accepted, receipt.errors
    service.merge_and_ingest(plan["run_id"], [])

    with service.store.read() as tx:
        audit = tx.current_audit()
        assert audit is not None
        aid = audit.audit_id
        by_cells = list(tx.iter_cells(aid, CellState.PENDING, CellKind.REVIEW))
        units = list(tx.queue_units(aid))
        # Every way a pending cell is held is here: implied by its unit, a row that came back to the queue,
        # units a run took in part; files in chunks; more than one lens set.
        if store_url == "sqlite":  # a shared store keeps the run's packets for other hosts to take instead
            # The run took some of one unit's lenses; they came back as rows, beside the lens it never took.
            assert any({c.attempts > 0 for c in u.cells()} == {True, False} for u in units)
        assert len(tx.lens_sets(aid)) > 1
        assert any(u.path == "pkg/tables.py" and u.start_line > 1 for u in units)
        assert [c for u in units for c in u.cells()] == by_cells
        assert [list(u.lenses()) for u in units] == [[c.lens for c in u.cells()] for u in units]
        assert [u.count for u in units] == [len(u.cells()) for u in units]

        files = {f.path: f for f in tx.files(aid)}
        edges = tx.weighted_edges(aid)
        assert edges, "the repository's imports resolve"
        for budget in (4_000, 9_000, 60_000):
            whole = pack(by_cells, files, edges, budget=budget, prefix_tokens=1_500)
            assert pack_units(units, files, edges, budget=budget, prefix_tokens=1_500) == whole
            # The head of the queue is the same units whether its cells are built or not.
            head = head_of_queue(iter(units), files, packets=2, room=budget - 1_500)
            heads = head_of_queue(iter(group_cells(by_cells)), files, packets=2, room=budget - 1_500)
            assert [(u.path, u.start_line, u.count) for u in head] == [(u.path, u.start_line, u.count) for u in heads]
            between = tx.weights_between(aid, {u.path for u in head})
            assert pack_units(head, files, between, budget=budget, prefix_tokens=1_500, limit=2) == pack(
                [c for u in heads for c in u.cells()], files, edges, budget=budget, prefix_tokens=1_500, limit=2
            )
