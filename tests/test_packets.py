"""Packing: budgets hold, files are read once, big files are chunked, related files travel together."""

from __future__ import annotations

import json
from pathlib import Path

from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.coverage import build_cells, chunk_ranges
from audit_mcp.engine.packets import pack
from audit_mcp.scheduling.limits import balanced_waves
from audit_mcp.store.records import FileRow
from audit_mcp.usecases.service import AuditService
from tests.driving import first_review


def _rows(n: int, lines: int = 100, size: int = 4_000) -> list[FileRow]:
    return [FileRow(f"pkg/m{i:03d}.py", "python", size, lines, f"h{i}", "review", None) for i in range(n)]


def test_every_packet_fits_its_budget_and_every_cell_lands_in_exactly_one_packet() -> None:
    rows = _rows(200)
    cells = build_cells(rows, SessionConfig())
    plans = pack(cells, {r.path: r for r in rows}, [], budget=40_000, prefix_tokens=5_000)
    assert all(p.estimated_tokens <= 40_000 for p in plans)
    packed = [c.task_id for p in plans for c in p.cells]
    assert sorted(packed) == sorted(c.task_id for c in cells)
    for plan in plans:
        paths = [u.path for u in plan.units]
        assert len(paths) == len(set(paths)), "a file is read once per packet, under all its lenses"


def test_a_limited_packing_is_the_head_of_the_whole_one() -> None:
    rows = _rows(120)
    cells = build_cells(rows, SessionConfig())
    edges = [("pkg/m000.py", "pkg/m100.py"), ("pkg/m003.py", "pkg/m090.py")]
    whole = pack(cells, {r.path: r for r in rows}, edges, budget=20_000, prefix_tokens=2_000)
    head = pack(cells, {r.path: r for r in rows}, edges, budget=20_000, prefix_tokens=2_000, limit=5)
    assert len(whole) > 5 and head == whole[:5]


def test_import_neighbours_travel_together() -> None:
    rows = _rows(60)
    edges = [("pkg/m000.py", "pkg/m059.py")]
    plans = pack(
        build_cells(rows, SessionConfig(lenses=["security"])),
        {r.path: r for r in rows},
        edges,
        budget=12_000,
        prefix_tokens=1_000,
    )
    first = {u.path for u in plans[0].units}
    assert {"pkg/m000.py", "pkg/m059.py"} <= first


def test_files_past_the_threshold_are_split_into_line_range_chunks() -> None:
    assert chunk_ranges(2_400, 2_500, 1_500) == [(1, 2_400)]
    assert chunk_ranges(4_000, 2_500, 1_500) == [(1, 1_500), (1_501, 3_000), (3_001, 4_000)]


def test_a_chunked_file_gets_targeted_read_instructions(repo: Path) -> None:
    (repo / "huge.py").write_text("".join(f"value_{i} = {i}\n" for i in range(3_200)))
    (repo / ".audit-mcp.toml").write_text('lenses = ["correctness"]\n')
    service = AuditService(repo)
    step = first_review(service, {"can_dispatch_subagents": True})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    ranges = sorted(
        (t["start_line"], t["end_line"]) for p in plan["packets"] for t in p["tasks"] if t["file"] == "huge.py"
    )
    assert ranges == [(1, 1_500), (1_501, 3_000), (3_001, 3_200)]
    prompts = "".join(Path(p["prompt_path"]).read_text() for p in plan["packets"])
    assert "`huge.py` is 3200 lines long: review lines 1501-3000 only" in prompts


def test_waves_are_balanced_and_never_wider_than_sixteen() -> None:
    assert balanced_waves(25, 16) == [13, 12]
    assert balanced_waves(40, 20) == [14, 13, 13]
    assert balanced_waves(3, 4) == [3]
    assert balanced_waves(0, 4) == []


def test_packet_prompts_share_a_byte_identical_leading_block(repo: Path) -> None:
    (repo / ".audit-mcp.toml").write_text("max_packet_tokens = 20000\n")
    step = first_review(AuditService(repo), {"can_dispatch_subagents": True})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    assert len(plan["packets"]) >= 2
    prompts = [Path(p["prompt_path"]).read_text() for p in plan["packets"]]
    prefixes = {text.split("# Your assignment")[0] for text in prompts}
    assert len(prefixes) == 1
    assert all(p["estimated_tokens"] <= 20_000 for p in plan["packets"])
