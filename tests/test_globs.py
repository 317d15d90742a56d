"""Gitignore patterns from the repository under audit match in linear time, whatever they hold; each is read as
git reads it, and a pattern that cannot be used is named (from a config) or left out (from a .gitignore)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from audit_mcp.core.errors import ConfigError
from audit_mcp.engine.globs import compile_globs, lenient_globs
from audit_mcp.usecases.service import AuditService
from tests.conftest import git

STARS = "*" * 100
CAPS = {"can_dispatch_subagents": True}


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.py", "a/b/c.py", True),
        ("/top.py", "a/top.py", False),
        ("build/", "build/x.js", True),
        ("a/**/z.py", "a/b/c/z.py", True),
        ("**/tests", "x/tests/t.py", True),
        ("*a*a*a*a*a*a*a*a*a*b", "a" * 300, False),
        (STARS + "x", "a" * 300 + "/" + "a" * 300, False),
        (STARS + "x", "dir/ax", True),
        ("caf\u00e9/*", "caf\u00e9/menu.py", True),
        ("*.py", "name\udcff.py", True),  # a name that is not UTF-8 still matches as a name
    ],
    ids=[
        "suffix",
        "anchored",
        "folder",
        "double-star",
        "leading-double-star",
        "many-stars",
        "hundred",
        "hundred-hit",
        "unicode",
        "not-utf8",
    ],
)
def test_patterns_match_as_git_reads_them(pattern: str, path: str, expected: bool) -> None:
    assert compile_globs([pattern], source="test").match(path) is expected


def test_the_last_matching_pattern_decides_and_says_which_it_was() -> None:
    globs = compile_globs(["*.log", "!keep.log", "# comment", "tmp/"], source="test")
    assert globs.decide("x/debug.log") == (True, 0)
    assert globs.decide("x/keep.log") == (False, 1)
    assert globs.decide("tmp/a.py") == (True, 3)
    assert globs.decide("src/a.py") == (None, None)


def test_a_pattern_that_cannot_be_used_is_named_from_a_config_and_left_out_of_a_gitignore() -> None:
    with pytest.raises(ConfigError, match=r"exclude in the config: the pattern '\[z-a\]' cannot be used"):
        compile_globs(["*.py", "[z-a]"], source="exclude in the config")
    kept = lenient_globs(["[z-a]", "*.log", "\\"])
    assert kept.lines == ("*.log",) and kept.match("x.log")


def test_a_hundred_stars_in_every_place_a_repository_writes_patterns_cannot_stall_intake(tmp_path: Path) -> None:
    """Run in a child process with a deadline: a backtracking matcher would run for hours here."""
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    for i in range(8):
        (root / "pkg" / f"{'a' * 60}{i}.py").write_text(f"x = {i}\n")
    (root / ".gitignore").write_text(STARS + "x\n")  # a plain folder: .gitignore files are read by audit-mcp
    (root / ".audit-mcp.toml").write_text(
        f'include = ["{STARS}"]\nexclude = ["{STARS}x"]\n[[lens_rules]]\nglob = "{STARS}y"\nlenses = ["security"]\n'
    )
    code = (
        "import sys; from pathlib import Path; from audit_mcp.usecases.service import AuditService; "
        "step = AuditService(Path(sys.argv[1])).next_step({'can_dispatch_subagents': True}); print(step.step_kind)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("dispatch_review", "capability_check")


def test_a_requeue_choice_with_many_stars_is_matched_at_once(repo: Path) -> None:
    git(repo, "status")
    service = AuditService(repo)
    service.next_step(CAPS)
    with pytest.raises(ConfigError):  # nothing matches it: refused, and quickly
        service.requeue(files=["*" * 200 + "nothing"], lenses=[], tasks=[], reason="recheck")
