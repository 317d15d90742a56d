"""The coverage matrix the store inserts in one statement is exactly the one ``build_cells`` defines."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit_mcp.core.config import LensRule, SessionConfig
from audit_mcp.engine.coverage import build_cells
from audit_mcp.engine.imports import import_edges
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


def test_python_imports_in_every_form_become_edges() -> None:
    known = {"pkg/__init__.py", "pkg/a.py", "pkg/b.py", "pkg/sub/c.py", "pkg/sub/__init__.py", "util.py", "d.py"}
    text = (
        "import util, d\n"
        "from . import a\n"
        "    from .sub import c  # indented, inside a function\n"
        "from pkg.b import (thing,\n    other)\n"
        "x = 'from nowhere import this'\n"
    )
    assert import_edges("pkg/main.py", "python", text, known) == {
        "util.py",
        "d.py",
        "pkg/__init__.py",
        "pkg/a.py",
        "pkg/sub/c.py",
        "pkg/sub/__init__.py",
        "pkg/b.py",
    }
    assert import_edges("pkg/main.py", "python", "print('no imports')\n", known) == set()


def test_the_string_scan_reads_only_lines_that_can_import() -> None:
    known = {"pkg/a.py", "pkg/b.py", "pkg/c.py", "tabbed.py", "last.py"}
    text = (
        "\t\timport tabbed\n"
        "doc = 'import pkg.c'  # not at the start of a line\n"
        "fromage import pkg.c\n"
        "importer = 1\n"
        "from pkg import a, b\r\n"
        "from pkg.c\n"  # a from without import: nothing
        "import last"  # the last line, without a newline
    )
    assert import_edges("main.py", "python", text, known) == {"tabbed.py", "pkg/a.py", "pkg/b.py", "last.py"}


@pytest.mark.parametrize("between", [0, 1, 40, 2_000], ids=["together", "one-apart", "apart", "far-apart"])
def test_import_lines_read_the_same_together_or_spread_through_a_long_file(between: int) -> None:
    known = {"pkg/__init__.py", "pkg/a.py", "pkg/b.py", "pkg/sub/c.py", "util.py", "d.py", "last.py"}
    lines = [
        "import util, d",
        "x = 'import pkg.b'  # the word, but not an import",
        "from . import a",
        "    from .sub import c as see  # indented, inside a function",
        "from ..pkg.b import (thing,",
        "import last",
    ]
    filler = ["value = compute(value) + 1  # ordinary code"] * between
    text = "\n".join(part for line in lines for part in (*filler, line))
    assert import_edges("pkg/main.py", "python", text, known) == {
        "util.py",
        "d.py",
        "pkg/a.py",
        "pkg/sub/c.py",
        "pkg/__init__.py",
        "pkg/b.py",
        "last.py",
    }


def test_javascript_imports_across_lines_and_requires_become_edges() -> None:
    known = {"web/a.js", "web/b.ts", "web/lib/index.js", "web/c.mjs", "web/d.js", "web/e.js"}
    text = (
        'import {\n  one,\n  two,\n} from "./a";\n'
        "const b = require('./b.js');\n"
        "export * from './lib';\n"
        'const c = await import("./c.mjs");\n'
        "// reimport: import './d'\n"
        'const skipped = "require" + "(./e)";\n'
        'import x from "left-pad";\n'
    )
    assert import_edges("web/main.js", "javascript", text, known) == {
        "web/a.js",
        "web/b.ts",
        "web/lib/index.js",
        "web/c.mjs",
        "web/d.js",
    }


def test_a_python_import_resolves_to_the_module_python_would_prefer() -> None:
    # A module beats a package of the same name, and either beats the same under src/.
    known = {
        "a.py",
        "a/__init__.py",
        "src/a.py",
        "b/__init__.py",
        "src/b.py",
        "src/c/__init__.py",
        "src/d.py",
        "src/d/__init__.py",
        "src/__init__.py",
        "__init__.py",
        "e/f.py",
        "src/e/f.py",
    }
    text = "import a, b, c, d, src, e.f, missing\nfrom e import f\nfrom src import d\n"
    assert import_edges("main.py", "python", text, known) == {
        "a.py",
        "b/__init__.py",
        "src/c/__init__.py",
        "src/d.py",
        "src/__init__.py",
        "e/f.py",
    }
    assert import_edges("a.py", "python", "import a\n", known) == set()  # never an edge to itself
