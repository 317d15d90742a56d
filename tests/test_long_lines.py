"""Long single-line and minified files: chunked by size when their lines allow it, skipped with a reason when
one line alone is more than a packet can hold; no packet is ever planned over its token budget."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.coverage import file_ranges, max_unit_chars
from audit_mcp.store.records import FileRow
from tests.conftest import git
from tests.driving import cli

BUDGET = 60_000  # the default max_packet_tokens


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "wide"
    (root / "web").mkdir(parents=True)
    # A 1.3 MB bundle on one line, under a name that does not say it is minified.
    (root / "web" / "bundle.js").write_text("var a=" + ",".join(f"f{i % 9999}()" for i in range(150_000)) + ";\n")
    # 600 lines of 1,500 characters: under the line threshold, but far more than a packet holds.
    row = "x = [" + ", ".join(["'abcdefghij'"] * 108) + "]\n"
    (root / "wide.py").write_text("".join(f"# {n}\n{row}" for n in range(300)))
    (root / "app.py").write_text("def main():\n    return 1\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "wide files")
    return root


def test_no_packet_is_planned_over_budget_and_a_one_line_bundle_is_skipped_with_a_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path)
    code, step = cli(capsys, "next-step", "--root", str(root), "--host-can-dispatch-subagents", "true")
    assert code == 0 and step["step_kind"] == "dispatch_review", step
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    assert plan["packets"] and all(p["estimated_tokens"] <= BUDGET for p in plan["packets"]), [
        p["estimated_tokens"] for p in plan["packets"]
    ]
    chunks = {(t["start_line"], t["end_line"]) for p in plan["packets"] for t in p["tasks"] if t["file"] == "wide.py"}
    assert len(chunks) > 1  # split by its size although it has fewer lines than the line threshold
    code, report = cli(capsys, "report", "--root", str(root), "--format", "json")
    skipped = {s["file"]: s["reason"] for s in report["gaps"]["skipped_files"]}
    assert (
        "minified or one-line file" in skipped["web/bundle.js"] and "review its source form" in skipped["web/bundle.js"]
    )


@pytest.mark.parametrize(
    ("size", "lines", "language"),
    [(1_300_000, 1, "javascript"), (900_000, 600, "python"), (60_000, 40_000, "python"), (5_000, 3, "go")],
)
def test_every_chunk_of_a_file_fits_its_share_of_a_packet(size: int, lines: int, language: str) -> None:
    config = SessionConfig()
    row = FileRow("f", language, size, lines, "h", "review", None)
    ranges = file_ranges(row, config)
    assert ranges[0][0] == 1 and ranges[-1][1] == max(1, lines)
    assert all(b == a - 1 for (_, b), (a, _) in itertools.pairwise(ranges))
    per_line = size / lines
    if per_line <= max_unit_chars(language, config):  # a line that fits can always be chunked to fit
        assert all((end - start + 1) * per_line <= max_unit_chars(language, config) for start, end in ranges)


def test_a_line_over_what_a_packet_holds_is_found_wherever_it_falls_and_one_at_the_limit_is_not(
    tmp_path: Path,
) -> None:
    from audit_mcp.engine.intake import build_manifest

    config = SessionConfig(max_packet_tokens=4_000)
    limit = max_unit_chars("python", config)
    body = "".join(f"value_{n} = {n}\n" for n in range(limit // 10))  # ordinary lines, more than the limit in all
    wide, edge = "w = '" + "x" * limit + "'", "e = '" + "x" * (limit - 6) + "'"
    assert len(edge) == limit
    root = tmp_path / "lines"
    root.mkdir()
    files = {
        "first.py": wide + "\n" + body,
        "middle.py": body + wide + "\n" + body,
        "last.py": body + wide,  # no newline at the end
        "at_limit.py": body + edge + "\n" + body,
        "plain.py": body,
    }
    for name, text in files.items():
        (root / name).write_text(text)
    rows = {r.path: r for r in build_manifest(root, root / ".audit-mcp", config).files}
    for name in ("first.py", "middle.py", "last.py"):
        assert rows[name].scope == "skipped", name
        assert f"a line of {len(wide)} characters" in (rows[name].skip_reason or ""), rows[name].skip_reason
    assert rows["at_limit.py"].scope == "review" and rows["plain.py"].scope == "review"
