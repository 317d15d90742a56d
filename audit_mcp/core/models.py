"""Pydantic models of what the surfaces return (tool results, CLI JSON, files on disk)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CONTRACT_VERSION = "audit-mcp/1"

StepKind = Literal["capability_check", "dispatch_review", "single_task_fallback", "wait", "present_report", "blocked"]


class _Model(BaseModel):
    # A model's validator and serializer are built when it is first used, not when this module loads: a
    # command-line verb uses two or three of these, and need not pay for building the others.
    model_config = ConfigDict(defer_build=True)


class HostCapabilities(_Model):
    can_dispatch_subagents: bool | None = None
    can_restrict_subagent_tools: bool = False
    can_select_subagent_model: bool = False
    max_active_subagents: int = 4
    dispatch_mode: Literal["rolling", "whole_wave"] = Field(
        default="rolling",
        description="rolling: a slot is refilled as soon as a subagent finishes; whole_wave: the host waits "
        "for every subagent of a wave before it starts the next.",
    )
    model: str | None = None
    client_name: str | None = None
    sources: dict[str, str] = Field(default_factory=dict, description="Where each value came from.")


class Step(_Model):
    """What the host must do next, and nothing else."""

    contract_version: str = CONTRACT_VERSION
    step_kind: StepKind
    status: Literal["ready", "complete", "blocked"]
    run_id: str | None
    summary: str = Field(description="One paragraph: what to do now and why.")
    prompt_uri: str = "audit://step/current/prompt"
    prompt_path: str
    allowed_actions: list[str]
    stop_condition: str
    repo_root: str
    artifacts_dir: str
    artifact_paths: dict[str, str]
    reason: str
    host: HostCapabilities
    wave_size: int | None = None
    waves: list[int] | None = None
    dispatch_mode: Literal["rolling", "whole_wave"] | None = Field(
        default=None,
        description="How to dispatch the run: rolling (keep wave_size running, start the next packet as soon "
        "as one finishes) or whole_wave (launch each wave together and wait for all of it).",
    )
    packets_outstanding: int | None = None
    packet_ids: list[str] | None = Field(
        default=None,
        description="The packets this step hands out, in launch order (in a shared store: those this host holds).",
    )
    cooldown_until: str | None = None
    launch_interval_seconds: float | None = Field(
        default=None, description="The steady gap between subagent starts once the rate-limit burst is used."
    )
    launch_offsets: dict[str, float] | None = Field(
        default=None,
        description="Packets that must not start sooner than this many seconds after the run's "
        "first subagent started (packets not listed may start at once).",
    )
    forecast: dict[str, object] | None = Field(
        default=None, description="Packets, waves, estimated tokens and a time range for the work handed out."
    )
    retry_after_seconds: float | None = Field(
        default=None,
        description="A wait step: other hosts hold the rest of the run's packets; call next_step again after this.",
    )
    coverage: dict[str, int] = Field(default_factory=dict)
    completeness: str = "unknown"
    notices: list[str] = Field(
        default_factory=list,
        description="What the user must be told, whatever the step: e.g. an artifacts folder that came with the "
        "checkout and was not read.",
    )
    obligations: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="Cells by obligation (context: the threat model; review; verify: second opinions) and state.",
    )


class Problem(_Model):
    location: str
    message: str


class Receipt(_Model):
    """The answer to a submission: accepted or not, and exactly what to fix."""

    accepted: bool
    run_id: str
    packet_id: str
    duplicate: bool = False
    dry_run: bool = Field(default=False, description="True when nothing was recorded (validate_results).")
    errors: list[Problem] = Field(default_factory=list)
    warnings: list[Problem] = Field(default_factory=list)
    tasks_covered: int = 0
    tasks_open: int = 0
    findings_kept: int = 0
    next_action: str


class FileReceipt(_Model):
    """The receipt of one results file of ``ingest-results`` or ``validate-results``."""

    file: str
    packet_id: str
    receipt: Receipt


class EvidenceReceipt(_Model):
    """The answer to attaching runtime evidence: what was stored and what it did to the finding."""

    accepted: bool
    evidence_id: int
    finding_id: str = Field(description="The finding's id in the report as it stands now.")
    fingerprint: str = Field(description="The identity the evidence is stored under; it follows the finding.")
    verdict: Literal["reproduced", "not_reproduced"]
    status: str = Field(description="The finding's status now (reproduced outranks unverified findings).")
    severity: str
    stored_chars: int
    truncated: bool = Field(description="True when the output was longer than the cap and was cut.")
    report_updated: bool = Field(description="True when the written report files were written again with it.")
    next_action: str


class RequeuedTask(_Model):
    task_id: str
    file: str
    lens: str
    why: str
    state: Literal["pending", "failed"]


class MergeSummary(_Model):
    run_id: str
    already_merged: bool = False
    packets_merged: int
    packets_failed: int
    tasks_covered: int
    tasks_requeued: int
    tasks_failed: int
    requeued: list[RequeuedTask] = Field(description="At most 50 entries; the report names every gap.")
    failure_kinds: dict[str, int] = Field(default_factory=dict)
    ingested_from_files: list[str] = Field(
        default_factory=list, description="Packets never submitted whose results file was valid and is now recorded."
    )
    invalid_results_files: dict[str, str] = Field(
        default_factory=dict,
        description="Packets whose results file was refused, with its errors; they are handed out again.",
    )
    unissued_results_files: list[str] = Field(
        default_factory=list,
        description="Files in the run's results folder that no packet was told to write (not a name a packet "
        "prompt gave): never read. Something other than this audit's reviewers put them there.",
    )
    waiting_packets: int = Field(
        default=0,
        description="A shared run not merged yet: packets other hosts still hold or nobody has claimed.",
    )
    worker_output: dict[str, str] = Field(
        default_factory=dict,
        description="What workers that did their packet printed about usage and rate limits, by packet; it is "
        "learned as a failed worker's error text is.",
    )
    coverage: dict[str, int]
    completeness: str
    verifications_planned: int = Field(
        default=0,
        description="Verification tasks this merge added: the review is done, and findings at or above the "
        "configured severity (and doubtful duplicates) now get a second opinion before the report.",
    )
    next_action: str


class WaitingPacket(_Model):
    packet_id: str
    not_before_seconds: float = Field(description="Earliest start, in seconds after the run's first subagent started.")


class PlanStatus(_Model):
    """A run in flight, now: what the host should do with the packets it has not launched yet."""

    run_id: str
    dispatch_mode: Literal["rolling", "whole_wave"]
    width: int = Field(description="rolling: keep this many running; whole_wave: the next wave's size.")
    planned_width: int = Field(description="The width the run was dispatched with.")
    waves: list[int] = Field(description="How the waiting packets go out.")
    cooldown_until: str | None = Field(description="UTC; launch nothing before it.")
    waiting: list[WaitingPacket] = Field(description="Packets not launched, submitted or failed, in launch order.")
    held: list[str] = Field(
        default_factory=list,
        description="Packets not to launch: their first call no longer fits the input bucket as now known. "
        "They are handed out again, packed smaller, in the next run.",
    )
    submitted: int
    failed: int
    running: int = Field(description="Packets launched (as reported) and neither submitted nor failed.")
    failures_recorded: int = Field(description="Failures in this call that were new (learned now).")
    reasoning: str
    forecast: dict[str, object] = Field(default_factory=dict)
    next_action: str


class LimitView(_Model):
    value: int
    source: str
    confidence: Literal["low", "medium", "high"]


class QuotaStatus(_Model):
    provider: str
    model: str
    limits: dict[str, LimitView]
    packet_budget_tokens: int
    learned: dict[str, str | int | float | None]
    learned_state_path: str
    host_max_active_subagents: int
    schedule: dict[str, object]
    forecast: dict[str, object] = Field(default_factory=dict)
    notes: list[str]
    probe: dict[str, object] = Field(
        default_factory=dict,
        description="The provider probe: its mode, what was asked, the values read and those learned, or why "
        "nothing was asked.",
    )


class StatusView(_Model):
    repo_root: str
    artifacts_dir: str
    audit_id: int | None
    message: str | None = Field(
        default=None, description="Set when there is nothing to show yet: what to run to start an audit."
    )
    completeness: str
    coverage: dict[str, int]
    coverage_by_lens: dict[str, dict[str, int]]
    findings_by_severity: dict[str, int]
    runs: list[dict[str, object]]
    skipped_files: int
    skipped: list[dict[str, object]] = Field(
        default_factory=list,
        description="Files skipped at intake, each with its kind and the reason (at most 50; skipped_files "
        "counts all, skipped_by_reason groups them, the report names every one).",
    )
    skipped_by_reason: dict[str, int] = Field(default_factory=dict)
    blocker: str | None
    abandoned: str | None = Field(default=None, description="When and why the audit was abandoned, if it was.")
    ledger: list[dict[str, object]]
    gaps: list[dict[str, object]] = Field(
        default_factory=list, description="Failed or skipped cells, at most 20; gaps_total counts all."
    )
    gaps_total: int = 0
    forecast: dict[str, object] = Field(
        default_factory=dict, description="What remains: open packets, pending cells, waves, cooldown."
    )
    obligations: dict[str, object] = Field(
        default_factory=dict,
        description="Each obligation's cells by state: the context pass (and the threat model it wrote), review, "
        "verification (threshold, findings still due a verifier, findings by status), runtime evidence attached.",
    )
    refuted: int = Field(default=0, description="Findings a verifier refuted (kept in the report's refuted section).")
