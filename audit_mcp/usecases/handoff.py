"""The operator hand-off: files beside the step saying what a person must do when the audit is blocked.

Whenever a step is ``blocked``, ``steps/operator-handoff.json`` and ``operator-handoff.md`` say what
happened, what the person must do, and the exact command that resumes the audit (the one that was
running, for ``audit-mcp run``). When a later step is no longer blocked, both files are removed.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from audit_mcp.core.escape import md_block, md_code, md_fence
from audit_mcp.core.fs import write_atomic
from audit_mcp.core.models import Step
from audit_mcp.core.userstate import state_arguments
from audit_mcp.engine.templates import render
from audit_mcp.usecases.workspace import Workspace

SCHEMA = "audit-mcp.operator-handoff/1"
RETRY = "--retry-blocked"
_START_ONLY_FLAGS = ("--since", "--analyzer-sarif")  # read when an audit starts; refused for one in flight


def handoff_paths(ws: Workspace) -> tuple[Path, Path]:
    folder = ws.artifacts_dir / "steps"
    return folder / "operator-handoff.json", folder / "operator-handoff.md"


def update_handoff(ws: Workspace, step: Step, *, command: list[str] | None = None) -> None:
    """Write the hand-off for a blocked step, or remove it for any other step.

    ``command`` is the command line that was running (``audit-mcp run ...``): the resume command repeats
    it. Without it the resume command is ``audit-mcp next-step`` for this root and artifacts directory.
    """
    json_path, md_path = handoff_paths(ws)
    if step.step_kind != "blocked":
        for path in (json_path, md_path):
            path.unlink(missing_ok=True)
        return
    with ws.store.read() as tx:
        audit = tx.current_audit()
    stored = audit is not None and audit.blocker is not None and audit.blocker == step.reason
    doc = _document(ws, step, stored, command, audit.audit_id if audit else None)
    write_atomic(json_path, json.dumps(doc, indent=2) + "\n")
    write_atomic(md_path, _markdown(ws, doc, step, json_path, md_path))


def _document(
    ws: Workspace, step: Step, stored: bool, command: list[str] | None, audit_id: int | None
) -> dict[str, Any]:
    base = [
        "audit-mcp",
        "next-step",
        "--root",
        str(ws.root),
        "--artifacts-dir",
        str(ws.artifacts_dir),
        *state_arguments(),
    ]
    argv = resumable(command, started=audit_id is not None) if command else base
    if stored and RETRY not in argv:
        argv.append(RETRY)  # the blocker is recorded: resuming must say it is fixed
    where = ["--root", str(ws.root), "--artifacts-dir", str(ws.artifacts_dir), *state_arguments()]
    todo = [
        "Fix the cause that what_happened names; it says how.",
        "The blocker is recorded in the audit, so the resume command says it is fixed (--retry-blocked)."
        if stored
        else "Nothing is recorded in the audit: once the cause is fixed, the resume command goes on by itself.",
        f"Then run the resume command: {shlex.join(argv)}",
    ]
    return {
        "schema_version": SCHEMA,
        "status": "blocked",
        "written_at": ws.now(),
        "repo_root": str(ws.root),
        "artifacts_dir": str(ws.artifacts_dir),
        "audit_id": audit_id,
        "run_id": step.run_id,
        "what_happened": step.reason,
        "blocker_recorded": stored,
        "what_to_do": todo,
        "resume_command": shlex.join(argv),
        "resume_tool_call": {"tool": "next_step", "arguments": {"retry_blocked": True} if stored else {}},
        "inspect_commands": {
            "status": shlex.join(["audit-mcp", "status", *where]),
            "report": shlex.join(["audit-mcp", "report", *where]),
            "abandon": shlex.join(["audit-mcp", "abandon", *where, "--reason", "..."]),
        },
        "step_path": str(ws.step_json_path),
        "coverage": step.coverage,
        "completeness": step.completeness,
    }


def resumable(command: list[str], *, started: bool) -> list[str]:
    """The command that was running, less what only applies when an audit starts, if one has started."""
    if not started:
        return list(command)
    out: list[str] = []
    skip = False
    for arg in command:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _START_ONLY_FLAGS:
            skip = "=" not in arg
            continue
        if name != "--new-audit":
            out.append(arg)
    return out


def _markdown(ws: Workspace, doc: dict[str, Any], step: Step, json_path: Path, md_path: Path) -> str:
    c = step.coverage
    coverage = (
        f"Coverage so far: {c.get('reviewed', 0)} of {c.get('total', 0)} cells reviewed, {c.get('pending', 0)} "
        f"pending, {c.get('failed', 0)} failed (completeness: {step.completeness})."
        if c
        else "No coverage matrix yet."
    )
    inspect = "\n".join(
        f"- {what}: {md_code(cmd)}"
        for what, cmd in (
            ("the audit's state, runs and recent events", doc["inspect_commands"]["status"]),
            ("the report so far", doc["inspect_commands"]["report"]),
            ("give the audit up (its ledger is kept)", doc["inspect_commands"]["abandon"]),
        )
    )
    note = (
        "A host on MCP resumes with the `next_step` tool and `retry_blocked=true`."
        if doc["blocker_recorded"]
        else "A host on MCP resumes with the `next_step` tool."
    )
    return render(
        "handoff/operator-handoff.md",
        repo_root=md_code(ws.root),
        written_at=doc["written_at"],
        coverage_line=coverage,
        what_happened=md_block(step.reason),
        what_to_do=f"- Fix the cause named above; it says how.\n- {doc['what_to_do'][1]}",
        resume_command=md_fence(doc["resume_command"], "sh"),
        resume_note=note,
        inspect=inspect,
        markdown_path=md_code(md_path),
        json_path=md_code(json_path),
    )
