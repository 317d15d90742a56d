"""A plain directory is walked as git would list it: nested .gitignore files, negation, ignored directories."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from audit_mcp.engine.ignores import IgnoreRules, walk_paths
from audit_mcp.usecases.service import AuditService
from tests.driving import first_review

TREE = {
    ".gitignore": "*.log\nbuild/\n/top-only.txt\nlogs/*\n!logs/kept/\n",
    "app.log": "x",
    "top-only.txt": "x",
    "src/top-only.txt": "kept: the pattern is anchored to the root",
    "src/app.py": "print(1)\n",
    "src/debug.log": "x",
    "build/out.py": "x",
    "logs/.gitignore": "!keep.log\n",
    "logs/keep.log": "re-included by the deeper file",
    "logs/other.log": "x",
    "logs/kept/a.txt": "re-included directory",
    "sub/.gitignore": "!*.log\nsecret.txt\n",
    "sub/deep/trace.log": "re-included for everything below sub/",
    "sub/deep/secret.txt": "ignored by sub/.gitignore",
    "sub/deep/.gitignore": "trace.log\n",
    "sub/build/.gitignore": "!out.py\n",
    "sub/build/out.py": "git never looks inside an ignored directory",
    "vendor/.gitignore": "*\n!.gitignore\n!*.py\n",
    "vendor/lib.py": "x",
    "vendor/lib.c": "x",
}


def _write(root: Path) -> Path:
    for rel, text in TREE.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_walk_lists_exactly_what_git_lists(tmp_path: Path) -> None:
    plain = _write(tmp_path / "plain")
    with_git = tmp_path / "git"
    shutil.copytree(plain, with_git)
    subprocess.run(["git", "init", "-q"], cwd=with_git, check=True)
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"], cwd=with_git, check=True, capture_output=True, text=True
    ).stdout.split()
    walked = walk_paths(plain)
    assert walked == sorted(listed)
    assert "logs/keep.log" in walked and "logs/other.log" not in walked  # deeper negation wins
    assert "sub/deep/trace.log" not in walked  # the deepest decision wins again
    assert "sub/build/out.py" not in walked and "build/out.py" not in walked  # inside an ignored directory
    assert "src/top-only.txt" in walked and "top-only.txt" not in walked


@pytest.mark.parametrize(
    ("path", "is_dir", "ignored"),
    [
        ("logs/keep.log", False, False),
        ("logs/sub/keep.log", False, False),
        ("logs/other.log", False, True),
        ("app.log", False, True),
        ("src/x.py", False, False),
        ("build", True, True),
        ("build", False, False),
    ],
    ids=["negated-deeper", "negated-below-the-deeper-file", "root-pattern", "root", "no-match", "dir-only", "a-file"],
)
def test_the_deepest_matching_file_decides(path: str, is_dir: bool, ignored: bool) -> None:
    rules = IgnoreRules()
    rules.add("", ["*.log", "build/"])
    rules.add("logs", ["!keep.log"])
    assert rules.ignored(path, is_dir) is ignored


def test_intake_of_a_plain_directory_reviews_a_file_a_deeper_gitignore_re_includes(plain_repo: Path) -> None:
    (plain_repo / ".gitignore").write_text("*.log\ntools/*.py\n")
    (plain_repo / "tools").mkdir()
    (plain_repo / "tools" / ".gitignore").write_text("!keep.py\n")
    (plain_repo / "tools" / "keep.py").write_text("import os\n\nos.system('make')\n")
    (plain_repo / "tools" / "scratch.py").write_text("print('ignored')\n")
    step = first_review(AuditService(plain_repo), {"can_dispatch_subagents": True})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    files = {task["file"] for packet in plan["packets"] for task in packet["tasks"]}
    assert "tools/keep.py" in files
    assert "tools/scratch.py" not in files and "debug.log" not in files
