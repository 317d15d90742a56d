"""File names a hostile repository can commit (a tab, a newline, a backslash, quotes, PostgreSQL's text
``\\N`` null marker, a leading dash, non-ASCII letters) survive intake, the matrix, a run, a finding and the
report on either store: on PostgreSQL a new audit's manifest, units and packets go in ``COPY`` streams, whose
text format gives tabs, newlines and backslashes a meaning of their own."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from audit_mcp.usecases.service import AuditService
from tests.conftest import git
from tests.test_implicit_cells import REVIEW_ONLY

HOSTILE = (
    "tab\there.py",
    "new\nline.py",
    "back\\slash.py",
    "\\N",
    "\\.",
    'quote\'s "both".py',
    "-dash.py",
    "comma,semi;colon 100%.py",
    "ünï cödé.py",
    "dir\twith tab/inner.py",
)
_CODE = "import os\n\n\ndef read(name):\n    return open(os.path.join('/srv', name)).read()\n"
_FLAW = "    return open(os.path.join('/srv', name)).read()"


def _repository(root: Path) -> None:
    root.mkdir()
    for n in range(40):  # enough rows for every bulk insert of the manifest to be a COPY stream
        (root / f"plain_{n:02d}.py").write_text(_CODE.replace("read", f"read_{n}"))
    for name in HOSTILE:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(_CODE)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "hostile names")


def _answer(packet: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for task in packet["tasks"]:
        findings = []
        if task["file"] == HOSTILE[0] and task["lens"] == "security":
            findings.append(
                {
                    "title": "Path traversal through the name argument",
                    "severity": "high",
                    "confidence": "high",
                    "category": "CWE-22",
                    "file": task["file"],
                    "start_line": 5,
                    "end_line": 5,
                    "evidence": _FLAW,
                    "description": "read joins a caller-supplied name onto /srv unchecked: '../etc/passwd' escapes it.",
                    "recommendation": "Resolve the joined path and refuse one outside /srv.",
                }
            )
        summary = (
            f"Read {task['file']!r} lines {task['start_line']}-{task['end_line']} in full under the {task['lens']} "
            "lens: read() joins its name argument onto /srv and opens it, traced to the open call."
        )
        out.append({"task_id": task["task_id"], "status": "reviewed", "findings": findings, "summary": summary})
    return out


def test_hostile_file_names_are_audited_to_the_report_exactly_as_git_lists_them(tmp_path: Path, store_url: str) -> None:
    root = tmp_path / "repo"
    _repository(root)
    # The names without an extension (``\\N``, ``\\.``) read as documentation: reviewed too.
    (root / ".audit-mcp.toml").write_text(REVIEW_ONLY + "review_docs = true\n")
    listed = set(
        subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout.decode().split("\0")
    ) - {""}
    assert set(HOSTILE) <= listed

    service = AuditService(root)
    step = service.next_step({"can_dispatch_subagents": True})
    assert step.step_kind == "dispatch_review", step.step_kind
    with service.store.read() as tx:
        audit = tx.current_audit()
        assert audit is not None
        stored = {f.path: f for f in tx.files(audit.audit_id)}
    assert set(stored) == listed - {".audit-mcp.toml"}
    assert all(stored[name].scope == "review" for name in HOSTILE), {n: stored[n].skip_reason for n in HOSTILE}

    reviewed: set[str] = set()
    for _ in range(5):
        if step.step_kind != "dispatch_review" or step.run_id is None:
            break
        plan = json.loads(service.plan_path(step.run_id).read_text())
        for packet in plan["packets"]:
            reviewed |= {t["file"] for t in packet["tasks"]}
            receipt = service.submit_packet(plan["run_id"], packet["packet_id"], _answer(packet))
            assert receipt.accepted, receipt.errors
        service.merge_and_ingest(plan["run_id"], [])
        step = service.next_step({})
    assert step.step_kind == "present_report", step.step_kind
    assert set(HOSTILE) <= reviewed

    report = json.loads(service.report("json"))
    assert report["completeness"] == "complete", report["coverage"]
    [finding] = [f for f in report["findings"] if f["title"].startswith("Path traversal")]
    assert finding["file"] == HOSTILE[0] and finding["start_line"] == 5
