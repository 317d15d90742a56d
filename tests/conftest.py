"""Shared fixtures: a git copy of the planted fixture repo, its answer key, and a scripted reviewer."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "init.defaultBranch=main", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


@pytest.fixture(autouse=True)
def _isolated_learned_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Learned rate-limit state goes to a temporary directory, never the user's; no provider is probed."""
    monkeypatch.setenv("AUDIT_MCP_STATE_DIR", str(tmp_path / "learned-state"))
    monkeypatch.setenv("AUDIT_MCP_PROBE", "never")


@pytest.fixture
def answer_key() -> dict[str, Any]:
    return json.loads((FIXTURES / "planted_app.answer-key.json").read_text())


@pytest.fixture
def plain_repo(tmp_path: Path) -> Path:
    """The planted fixture as a plain directory (no git), with an ignored log file beside it."""
    root = tmp_path / "planted_app"
    # What a person's own run left in the fixture (its artifacts directory) is never part of the copy.
    shutil.copytree(FIXTURES / "planted_app", root, ignore=shutil.ignore_patterns(".audit-mcp"))
    (root / "debug.log").write_text("request served\n")
    return root


@pytest.fixture
def repo(plain_repo: Path) -> Iterator[Path]:
    """The planted fixture as a committed git repository."""
    git(plain_repo, "init", "-q")
    git(plain_repo, "add", "-A")
    git(plain_repo, "commit", "-qm", "fixture")
    yield plain_repo


class ScriptedReviewer:
    """Answers packets honestly from the answer key: the planted issue when a task covers it, else a
    summary of what a reviewer would have read. It stands in for the host's subagents."""

    def __init__(self, answer_key: dict[str, Any]) -> None:
        self.issues = answer_key["issues"]
        self.reported: set[str] = set()

    def results(self, packet: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for task in packet["tasks"]:
            findings = []
            for issue in self.issues:
                if (
                    issue["file"] == task["file"]
                    and issue["lens"] == task["lens"]
                    and task["start_line"] <= issue["start_line"] <= task["end_line"]
                ):
                    self.reported.add(issue["id"])
                    findings.append(
                        {
                            k: issue[k]
                            for k in (
                                "title",
                                "severity",
                                "confidence",
                                "category",
                                "file",
                                "start_line",
                                "end_line",
                                "evidence",
                                "description",
                                "recommendation",
                                "symbol",
                            )
                        }
                        | ({"related_locations": issue["related_locations"]} if "related_locations" in issue else {})
                    )
            out.append(
                {
                    "task_id": task["task_id"],
                    "status": "reviewed",
                    "summary": f"Read {task['file']} lines {task['start_line']}-{task['end_line']} in full under "
                    f"the {task['lens']} lens and traced its inputs to their uses.",
                    "findings": findings,
                }
            )
        return out


@pytest.fixture
def reviewer(answer_key: dict[str, Any]) -> ScriptedReviewer:
    return ScriptedReviewer(answer_key)
