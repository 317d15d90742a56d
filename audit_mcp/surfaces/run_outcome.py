"""How ``audit-mcp run`` ends: its outcome (JSON on stdout), its exit code, and the command that resumes it.

Exit codes: 0 the audit is complete, 3 partial (gaps, ``--max-runs``, a cooldown past ``--max-wait``), 4
blocked (a person must act, then ``--retry-blocked``), 130 interrupted (Ctrl-C or SIGTERM). Whatever the end,
the outcome says what was done, what failed, and the command that goes on from there.
"""

from __future__ import annotations

import json
import shlex
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from audit_mcp.core.models import Step
from audit_mcp.usecases.handoff import resumable

EXIT_COMPLETE, EXIT_PARTIAL, EXIT_BLOCKED, EXIT_INTERRUPTED = 0, 3, 4, 130


@dataclass
class HeadlessResult:
    exit_code: int
    outcome: str
    message: str
    step: Step | None
    report_path: Path | None = None
    report_json_path: Path | None = None
    runs: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    resume_command: str | None = None
    progress: dict[str, Any] = field(default_factory=dict)


def resume_command(command: Sequence[str] | None, *, started: bool) -> str | None:
    """The command that goes on from here: the one that ran, less what only applies when an audit starts
    (``--since``, ``--new-audit``, ...) once one has."""
    return shlex.join(resumable(list(command), started=started)) if command else None


def interrupted(result: HeadlessResult, command: Sequence[str] | None) -> HeadlessResult:
    """``result`` (what the run did until now: its first step, once the audit is under way) as the outcome of
    an interrupted run."""
    started = result.step is not None
    result.exit_code, result.outcome, result.step = EXIT_INTERRUPTED, "interrupted", None
    result.resume_command = resume_command(command, started=started)
    result.message = (
        "interrupted; accepted work is saved. The workers still running were stopped: their packets go out again "
        + (f"when you resume with: {result.resume_command}" if result.resume_command else "when the audit resumes")
    )
    return result


def interrupt_on_sigterm() -> None:
    """Treat SIGTERM like Ctrl-C, so a stopped run kills its workers; accepted work stays saved."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def print_result(result: HeadlessResult, out: TextIO) -> None:
    doc = {
        "outcome": result.outcome,
        "exit_code": result.exit_code,
        "message": result.message,
        "runs": result.runs,
        "failed_packets": result.failures,
        "report": str(result.report_path) if result.report_path else None,
        "report_json": str(result.report_json_path) if result.report_json_path else None,
        "step_kind": result.step.step_kind if result.step else None,
        "resume_command": result.resume_command,
        "progress": result.progress,
    }
    out.write(json.dumps(doc, indent=2) + "\n")
