"""The package's shape is kept, not hoped for: layers, module sizes, and a docstring per layer."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parent.parent
PACKAGE = PROJECT / "audit_mcp"
LAYERS = ("surfaces", "usecases", "engine", "findings", "scheduling", "store", "core")
MAX_MODULE_LINES = 400
MAX_FACADE_LINES = 150


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_layers_contract_and_the_no_cycles_contract_hold() -> None:
    lint = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    proc = subprocess.run([lint, "--no-cache"], cwd=PROJECT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "2 kept, 0 broken" in proc.stdout


@pytest.mark.parametrize("layer", LAYERS)
def test_each_layer_says_what_lives_there_and_what_it_may_import(layer: str) -> None:
    init = PACKAGE / layer / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert doc and "May import:" in doc, f"{init} needs a docstring naming what lives there and what it may import"


def test_every_module_lives_in_a_layer() -> None:
    # __main__.py is only the `python -m audit_mcp` entry point into surfaces.cli
    loose = [p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert loose == [], f"modules outside the layers: {loose}; put each in the subpackage of its layer"


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {p.relative_to(PROJECT).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in _modules()}
    over = {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split them by concept): {over}"


def test_the_facade_stays_thin() -> None:
    facade = PACKAGE / "usecases" / "service.py"
    tree = ast.parse(facade.read_text(encoding="utf-8"))
    service = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "AuditService")
    lines = (service.end_lineno or service.lineno) - service.lineno + 1
    assert lines <= MAX_FACADE_LINES, f"AuditService is {lines} lines; move logic into its use-case module"
