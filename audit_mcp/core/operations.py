"""Result models of the operator verbs: explain a task, requeue, abandon, clean up, run one stage.

Like ``models``, these are what the MCP tools and the CLI return; fields are only ever added.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Result(BaseModel):
    # Built on first use, as ``models``' are: a verb returns one of these, and loads them all.
    model_config = ConfigDict(defer_build=True)


class TaskPacket(_Result):
    """One packet that held a task: its run, state, prompt, and what came of it."""

    packet_id: str
    run_id: str
    state: str = Field(description="issued, submitted, merged, failed or abandoned")
    prompt_path: str
    prompt_exists: bool
    submitted_at: str | None = None
    submitted_via: str | None = Field(
        default=None, description="'call' (the tool or the CLI), or 'file <path>' for a results file read"
    )
    result: dict[str, Any] | None = Field(default=None, description="The task's answer in that submission.")


class TaskExplanation(_Result):
    """Everything known about one task (a cell of the coverage matrix), and why it is open or closed."""

    task_id: str
    audit_id: int
    file: str
    start_line: int
    end_line: int
    lens: str
    state: str
    attempts: int
    max_attempts: int
    reason: str | None
    file_info: dict[str, Any]
    packets: list[TaskPacket]
    failures: list[dict[str, str]]
    findings: list[dict[str, Any]]
    requeue_requests: list[dict[str, Any]]
    why: str = Field(description="Why the task is open, or what closed it, in a sentence.")
    next_action: str


class FileTask(_Result):
    """One task of a file: its cell of the coverage matrix."""

    task_id: str
    lens: str
    start_line: int
    end_line: int
    state: str
    attempts: int
    packet_id: str | None = None
    reason: str | None = None
    findings: int = 0


class FileTasks(_Result):
    """Every task of one file in the current audit, with its state (``explain-task --file``)."""

    audit_id: int
    file: str
    scope: str = Field(description="review, or skipped (then `skip_reason` says why and there are no tasks).")
    skip_reason: str | None = None
    tasks: list[FileTask]
    by_state: dict[str, int]
    next_action: str


class RequeueResult(_Result):
    """What a requeue did: the cells sent back to review and those it could not send, with why."""

    audit_id: int
    reason: str
    requeued: list[str] = Field(description="Task ids back to pending; the next run reviews them.")
    already_pending: list[str] = Field(default_factory=list, description="Pending already; the reason is added.")
    not_requeued: dict[str, str] = Field(default_factory=dict, description="Task id -> why it was left as it is.")
    next_action: str


class AbandonResult(_Result):
    audit_id: int
    reason: str
    runs_closed: list[str]
    tasks_released: int
    next_action: str


class CleanupResult(_Result):
    """What cleanup removed (or, with dry_run, would remove), and what it always keeps."""

    dry_run: bool
    removed: list[str] = Field(description="Paths relative to the artifacts directory.")
    bytes_freed: int
    kept_runs: list[str]
    too_recent: list[str] = Field(
        default_factory=list, description="Finished runs left as they are: they finished less than 10 minutes ago."
    )
    never_removed: list[str]
    next_action: str


class StageResult(_Result):
    """One stage (intake, plan, synthesize) run on its own: whether it ran, and what it did."""

    stage: str
    ran: bool
    detail: str = Field(description="What the stage did, as the ledger records it; or why it did not run.")
    audit_id: int | None
    coverage: dict[str, int] = Field(default_factory=dict)
    completeness: str = "unknown"
    artifact_paths: dict[str, str] = Field(default_factory=dict)
    next_action: str
