"""The coverage matrix the store inserts in one statement is exactly the one ``build_cells`` defines."""

from __future__ import annotations

from pathlib import Path

from audit_mcp.core.config import LensRule, SessionConfig
from audit_mcp.engine.coverage import build_cells
from audit_mcp.usecases.service import AuditService
from tests.driving import first_review


def test_the_stored_matrix_matches_build_cells_with_lens_rules_and_chunks(repo: Path) -> None:
    (repo / "app" / "big.py").write_text("".join(f"value_{i} = {i}\n" for i in range(3_200)))
    (repo / ".audit-mcp.toml").write_text(
        'lenses = ["security", "correctness", "performance"]\nchunk_threshold_lines = 1000\nchunk_lines = 700\n'
        '[[lens_rules]]\nglob = "web/**"\nlenses = ["security"]\n'
        '[[lens_rules]]\nglob = "app/db.py"\nlenses = ["performance", "security"]\n'
    )
    service = AuditService(repo)
    first_review(service, {"can_dispatch_subagents": True})
    with service.store.read() as tx:
        audit = tx.current_audit()
        assert audit is not None
        files, stored = tx.files(audit.audit_id), tx.cells(audit.audit_id, kinds=["review"])
    config = SessionConfig(
        lenses=["security", "correctness", "performance"],
        chunk_threshold_lines=1000,
        chunk_lines=700,
        lens_rules=[
            LensRule(glob="web/**", lenses=["security"]),
            LensRule(glob="app/db.py", lenses=["performance", "security"]),
        ],
    )
    expected = {
        c.task_id: (c.path, c.start_line, c.end_line, c.lens, c.content_hash) for c in build_cells(files, config)
    }
    assert {c.task_id: (c.path, c.start_line, c.end_line, c.lens, c.content_hash) for c in stored} == expected
    assert [(s, e) for (p, s, e, lens, _) in expected.values() if p == "app/big.py" and lens == "security"] == [
        (1, 700),
        (701, 1400),
        (1401, 2100),
        (2101, 2800),
        (2801, 3200),
    ]
    assert {lens for (p, *_, lens, _) in expected.values() if p.startswith("web/")} == {"security"}
    assert [lens for (p, *_, lens, _) in expected.values() if p == "app/db.py"] == ["performance", "security"]
