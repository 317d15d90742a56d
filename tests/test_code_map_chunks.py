"""Chunks of a large file end at definitions: no function is cut in two where a whole one fits, in a file of
top-level functions or in one class that holds them all."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from audit_mcp.engine.coverage import chunk_ranges
from audit_mcp.usecases.service import AuditService
from tests.codemap_helpers import defs_of
from tests.driving import first_review


def test_a_chunk_ends_before_the_last_definition_that_starts_within_its_lines() -> None:
    cuts = [1, 40, 95, 150, 210, 260]
    assert chunk_ranges(300, 100, 100, cuts) == [(1, 94), (95, 149), (150, 209), (210, 300)]
    # Without a cut past the first quarter of a chunk, it ends at its length, as it would without a map.
    assert chunk_ranges(320, 100, 100, [1, 10, 260]) == [(1, 100), (101, 200), (201, 259), (260, 320)]
    assert chunk_ranges(300, 100, 100) == [(1, 100), (101, 200), (201, 300)]


def _python(functions: int) -> str:
    parts = ['"""Handlers, one after another."""\n', "import json\n"]
    for n in range(functions):
        body = "".join(f"    value = value * {k} % 97  # step {k}\n" for k in range(18 + n % 7))
        parts.append(
            f"\n\n# Handler {n}: its comment belongs to it.\ndef handler_{n}(value):\n{body}    return value\n"
        )
    return "".join(parts)


def _java(methods: int) -> str:
    parts = ["package big;\n\npublic class Handlers {\n"]
    for n in range(methods):
        body = "".join(f"        value = value * {k} % 97;\n" for k in range(18 + n % 7))
        parts.append(
            f"\n    /** Handler {n}. */\n    public int handler{n}(int value) {{\n{body}        return value;\n    }}\n"
        )
    return "".join(parts) + "}\n"


def _go(functions: int) -> str:
    parts = ["package big\n"]
    for n in range(functions):
        body = "".join(f"\tvalue = value * {k} % 97\n" for k in range(18 + n % 7))
        parts.append(f"\n// Handler{n} is one handler.\nfunc Handler{n}(value int) int {{\n{body}\treturn value\n}}\n")
    return "".join(parts)


@pytest.mark.parametrize(
    ("path", "text"),
    [("big/handlers.py", _python(160)), ("big/Handlers.java", _java(160)), ("big/handlers.go", _go(160))],
    ids=["python", "java", "go"],
)
def test_no_definition_is_split_across_chunks(path: str, text: str, repo: Path) -> None:
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    (repo / ".audit-mcp.toml").write_text('lenses = ["correctness"]\ncontext_pass = false\n')
    step = first_review(AuditService(repo), {"can_dispatch_subagents": True})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    ranges = sorted(
        {(t["start_line"], t["end_line"]) for p in plan["packets"] for t in p["tasks"] if t["file"] == path}
    )
    lines = text.count("\n")
    assert len(ranges) >= 3 and ranges[0][0] == 1 and ranges[-1][1] == lines
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges)), "chunks tile the file"
    functions = [d for d in defs_of(path, text) if d[1] in ("function", "method")]
    for name, _, start, end, _ in functions:
        holding = [r for r in ranges if r[0] <= start <= r[1]]
        assert holding and end <= holding[0][1], f"{name} (lines {start}-{end}) is split by the chunks {ranges}"
    # A chunk ends just above a definition's leading comment, not at a fixed line count.
    source = text.splitlines()
    for _, end in ranges[:-1]:
        assert source[end].lstrip().startswith(("#", "//", "/**")), source[end - 2 : end + 2]
