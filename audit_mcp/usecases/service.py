"""The facade every surface calls: one repository's audit, one method per use case.

The MCP server, the CLI, the headless runner and the demo hold no logic of
their own; they call ``AuditService``, which delegates each verb to its use
case module (``next_step``, ``submission``, ``merging``, ``reporting``,
``plan_status``, ``quota``, ``status``, and the operator verbs: ``deferred`` and
``result_files``, ``explaining``, ``requeueing``, ``abandoning``,
``cleaning``, ``stages``) over the shared ``Workspace``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from audit_mcp.core.models import (
    EvidenceReceipt,
    FileReceipt,
    MergeSummary,
    PlanStatus,
    QuotaStatus,
    Receipt,
    StatusView,
    Step,
)
from audit_mcp.core.operations import AbandonResult, CleanupResult, RequeueResult, StageResult, TaskExplanation
from audit_mcp.core.progress import Progress
from audit_mcp.engine.templates import render
from audit_mcp.findings.report import ReportInput
from audit_mcp.scheduling.worker_output import WorkerReport
from audit_mcp.usecases import (
    abandoning,
    audit_forecast,
    cleaning,
    completing,
    deferred,
    explaining,
    handoff,
    ledger_log,
    merging,
    next_step,
    plan_status,
    plans,
    quota,
    rates,
    reporting,
    requeueing,
    result_files,
    runtime,
    stages,
    status,
    submission,
)
from audit_mcp.usecases.surface_reads import SurfaceReads


class AuditService(SurfaceReads):
    """One repository's audit: the engine behind the MCP tools and the CLI verbs."""

    def next_step(
        self,
        capabilities: Mapping[str, Any] | None = None,
        *,
        client_name: str | None = None,
        new_audit: bool = False,
        retry_blocked: bool = False,
        progress: Progress | None = None,
        analyzer_sarif: Sequence[Path] = (),
        since: str | None = None,
        lenses: Sequence[str] | None = None,
        analyzer_files: Sequence[str] = (),
    ) -> Step:
        """Run every inline obligation, then return the one Step that needs the agent."""
        return next_step.next_step(
            self,
            capabilities,
            client_name=client_name,
            new_audit=new_audit,
            retry_blocked=retry_blocked,
            progress=progress,
            analyzer_sarif=analyzer_sarif,
            since=since,
            lenses=lenses,
            analyzer_files=analyzer_files,
        )

    def submit_packet(self, run_id: str, packet_id: str, results: Any, usage: Any = None) -> Receipt:
        return submission.submit_packet(self, run_id, packet_id, results, usage)

    def validate_results(self, run_id: str, packet_id: str, results: Any, usage: Any = None) -> Receipt:
        """The receipt ``submit_packet`` would give these results now; nothing is recorded."""
        return submission.submit_packet(self, run_id, packet_id, results, usage, dry_run=True)

    def ingest_results(
        self, files: Sequence[Path], *, run_id: str | None = None, packet_id: str | None = None, dry_run: bool = False
    ) -> list[FileReceipt]:
        return result_files.ingest_results(self, files, run_id=run_id, packet_id=packet_id, dry_run=dry_run)

    def collect_results_file(self, run_id: str, packet_id: str) -> Receipt | None:
        """Record the packet's results file at its documented path, if one was written (None if not)."""
        path = self.results_path(run_id, packet_id)
        exists = path.exists() or path.is_symlink()
        return deferred.ingest_file(self, run_id, packet_id, path) if exists else None

    def merge_and_ingest(
        self,
        run_id: str,
        failures: Sequence[Mapping[str, Any]] | None = None,
        *,
        actor: str = "host",
        progress: Progress | None = None,
        printed: Mapping[str, WorkerReport] | None = None,
    ) -> MergeSummary:
        return merging.merge_and_ingest(self, run_id, failures, actor=actor, progress=progress, printed=printed)

    def plan_status(
        self,
        run_id: str,
        failures: Sequence[Mapping[str, Any]] | None = None,
        launched: Sequence[str] | None = None,
    ) -> PlanStatus:
        return plan_status.plan_status(self, run_id, failures, launched)

    # operator verbs ---------------------------------------------------------------------
    def explain_task(self, task_id: str) -> TaskExplanation:
        return explaining.explain_task(self, task_id)

    def requeue(
        self,
        reason: str,
        *,
        files: Sequence[str] = (),
        lenses: Sequence[str] = (),
        tasks: Sequence[str] = (),
        findings: Sequence[str] = (),
    ) -> RequeueResult:
        """Chosen files, lenses, tasks or findings back to review in the next run."""
        return requeueing.requeue(self, reason=reason, files=files, lenses=lenses, tasks=tasks, findings=findings)

    def abandon(self, reason: str) -> AbandonResult:
        return abandoning.abandon(self, reason)

    def cleanup(self, *, keep_runs: int = 0, logs: bool = False, dry_run: bool = False) -> CleanupResult:
        return cleaning.cleanup(self, keep_runs=keep_runs, logs=logs, dry_run=dry_run)

    def update_handoff(self, step: Step, *, command: list[str] | None = None) -> None:
        """The operator hand-off beside a blocked step (resumed by ``command``), or none for another step."""
        handoff.update_handoff(self, step, command=command)

    def run_stage(self, stage: str, *, new_audit: bool = False) -> StageResult:
        return stages.run_stage(self, stage, new_audit=new_audit)

    def runtime_evidence(self, finding: str, verdict: str, output: str | bytes, **options: Any) -> EvidenceReceipt:
        """Evidence from running the code, to a finding; ``options``: command, kind, source, added_by."""
        return runtime.attach(self, finding, verdict, output, **options)

    def runtime_instructions(self, finding: str, evidence_cli: str) -> str:
        return runtime.instructions(self, finding, evidence_cli)

    def quota(self, host_model: str | None = None, provider: str | None = None) -> QuotaStatus:
        return quota.quota_view(self, host_model, provider)

    def audit_forecast(self) -> dict[str, Any]:
        """The whole audit's forecast of what remains, for the host the audit remembers."""
        return audit_forecast.for_remembered_host(self)

    def record_worker(self, run_id: str, packet_id: str, **entry: Any) -> None:
        """A headless worker's life, in the ledger (``ledger_log.record_worker`` names the fields)."""
        ledger_log.record_worker(self, run_id, packet_id, **entry)

    def status(self) -> StatusView:
        return status.status_view(self)

    def report(self, fmt: str = "md", *, drop_refuted: bool = False, audit_id: int | None = None) -> str:
        return reporting.report(self, fmt, drop_refuted=drop_refuted, audit_id=audit_id)

    def plan_view(
        self, run_id: str, *, cursor: str | None = None, limit: int | None = None, wave: int | None = None
    ) -> dict[str, Any]:
        return plans.plan_view(self, run_id, cursor=cursor, limit=limit, wave=wave)

    def declare_scripted_reviewer(self, label: str) -> None:
        """Mark this audit's reviews as scripted (by ``label``), so every report says so."""
        reporting.declare_scripted_reviewer(self, label)

    def build_report_input(self) -> ReportInput:
        return reporting.build_report_input(self)

    def coverage(self) -> dict[str, Any]:
        return reporting.coverage(self)

    def complete(self, kind: str, prefix: str, run_id: str | None = None) -> tuple[list[str], bool]:
        """Run, packet or task ids starting with ``prefix`` (at most 100), and whether more match."""
        return completing.complete(self, kind, prefix, run_id)

    def active_cooldown(self) -> str | None:
        """The end of a rate-limit cooldown still in force (UTC), if any."""
        return rates.active_cooldown(self)


def render_prompt(name: str, **values: str) -> str:
    """A prompt of ``prompts/`` (e.g. ``mcp/start_audit.md``) with its placeholders filled."""
    return render(name, **values)
