"""The obligation planner: from the audit's state, the single next thing to do.

Pure: ``decide(state, history)`` returns the same decision for the same
input, with the reason in words. Inline obligations are run by the engine
itself; agent obligations become the Step handed to the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

MAX_INLINE_STEPS = 24


class Obligation(StrEnum):
    INTAKE = "intake"
    PLAN = "plan"
    INGEST = "ingest"
    DISPATCH = "dispatch"
    PLAN_VERIFICATION = "plan_verification"
    SYNTHESIZE = "synthesize"
    CAPABILITY_CHECK = "capability_check"
    REVIEW = "review"
    PRESENT_REPORT = "present_report"
    BLOCKED = "blocked"


class Executor(StrEnum):
    INLINE = "inline"
    AGENT = "agent"


@dataclass(frozen=True)
class PlannerState:
    has_audit: bool
    has_cells: bool
    blocker: str | None
    open_run_id: str | None
    open_run_packets: int
    open_run_submitted: int
    pending_cells: int
    assigned_cells: int
    runs_started: int
    max_runs: int
    host_can_dispatch: bool | None
    synthesized: bool
    open_run_expired: int = 0
    pending_context: int = 0  # of pending_cells: the context cell, due before any review
    pending_verify: int = 0  # of pending_cells: verify cells, dispatched once review is done
    verification_due: int = 0  # findings and doubtful pairs with no verify cell yet (counted once nothing is open)

    def digest(self) -> tuple[object, ...]:
        return tuple(self.__dict__.values())


@dataclass(frozen=True)
class Decision:
    obligation: Obligation
    executor: Executor
    reason: str


def decide(state: PlannerState, history: tuple[tuple[Obligation, tuple[object, ...]], ...] = ()) -> Decision:
    """The next obligation for ``state``; ``history`` holds the inline steps already run in this call."""
    if state.blocker:
        return Decision(Obligation.BLOCKED, Executor.AGENT, state.blocker)
    if len(history) >= MAX_INLINE_STEPS:
        return Decision(
            Obligation.BLOCKED,
            Executor.AGENT,
            f"{MAX_INLINE_STEPS} inline steps ran without reaching work for the agent; this is a loop. "
            "Run `audit-mcp status` and report its output.",
        )
    decision = _decide(state)
    if decision.executor is Executor.INLINE and (decision.obligation, state.digest()) in history:
        return Decision(
            Obligation.BLOCKED,
            Executor.AGENT,
            f"the inline obligation '{decision.obligation}' ran and left the state unchanged, so running it "
            "again would loop. Run `audit-mcp status` and report its output.",
        )
    return decision


def _decide(s: PlannerState) -> Decision:
    if not s.has_audit:
        return Decision(Obligation.INTAKE, Executor.INLINE, "no audit exists yet: read the repository manifest")
    if not s.has_cells:
        return Decision(Obligation.PLAN, Executor.INLINE, "the manifest is read: build the coverage matrix")
    if s.open_run_id is not None:
        if s.open_run_expired:
            return Decision(
                Obligation.INGEST,
                Executor.INLINE,
                f"{s.open_run_expired} packet(s) of run {s.open_run_id} passed their lease without a submission: "
                "merge what arrived and return the rest to the queue",
            )
        if s.open_run_submitted >= s.open_run_packets:
            return Decision(
                Obligation.INGEST,
                Executor.INLINE,
                f"every packet of run {s.open_run_id} is submitted: merge it into the coverage matrix",
            )
        missing = s.open_run_packets - s.open_run_submitted
        return Decision(
            Obligation.REVIEW,
            Executor.AGENT,
            f"run {s.open_run_id} has {missing} of {s.open_run_packets} packet(s) still without an accepted submission",
        )
    if s.pending_cells:
        if s.runs_started >= s.max_runs:
            return Decision(
                Obligation.BLOCKED,
                Executor.AGENT,
                f"the run limit of {s.max_runs} runs is reached with {s.pending_cells} cell(s) still pending; "
                "raise max_runs in the session config, then call next_step again",
            )
        if s.host_can_dispatch is None:
            return Decision(
                Obligation.CAPABILITY_CHECK,
                Executor.AGENT,
                f"{s.pending_cells} cell(s) are ready for review, and whether this host can launch subagents "
                "is not known",
            )
        if s.pending_context:
            why = "the threat model is due before the first review run: pack the context packet"
        elif s.pending_cells > s.pending_verify:
            why = f"{s.pending_cells - s.pending_verify} review cell(s) are pending: pack them into a new run"
        else:
            why = f"{s.pending_verify} verify cell(s) are pending: pack them into verifier packets"
        return Decision(Obligation.DISPATCH, Executor.INLINE, why)
    if s.verification_due:
        return Decision(
            Obligation.PLAN_VERIFICATION,
            Executor.INLINE,
            f"review is done and {s.verification_due} finding(s) or doubtful pair(s) need a second opinion: "
            "add verify cells to the matrix",
        )
    if not s.synthesized:
        return Decision(Obligation.SYNTHESIZE, Executor.INLINE, "no cell is open: write the report")
    return Decision(Obligation.PRESENT_REPORT, Executor.AGENT, "the audit is finished and its report is written")
