"""The planner is a pure function of the state: a table of states and the obligation each leads to."""

from __future__ import annotations

from dataclasses import replace

import pytest

from audit_mcp.engine.planner import MAX_INLINE_STEPS, Executor, Obligation, PlannerState, decide

BASE = PlannerState(
    has_audit=True,
    has_cells=True,
    blocker=None,
    open_run_id=None,
    open_run_packets=0,
    open_run_submitted=0,
    pending_cells=10,
    assigned_cells=0,
    runs_started=0,
    max_runs=5,
    host_can_dispatch=True,
    synthesized=False,
)

CASES = [
    ("no audit → intake", replace(BASE, has_audit=False), Obligation.INTAKE, Executor.INLINE),
    ("no cells → plan", replace(BASE, has_cells=False), Obligation.PLAN, Executor.INLINE),
    ("pending, unknown host → ask", replace(BASE, host_can_dispatch=None), Obligation.CAPABILITY_CHECK, Executor.AGENT),
    ("pending → dispatch", BASE, Obligation.DISPATCH, Executor.INLINE),
    (
        "open run, all submitted → ingest",
        replace(BASE, open_run_id="R", open_run_packets=2, open_run_submitted=2),
        Obligation.INGEST,
        Executor.INLINE,
    ),
    (
        "open run, some missing → review",
        replace(BASE, open_run_id="R", open_run_packets=2, open_run_submitted=1),
        Obligation.REVIEW,
        Executor.AGENT,
    ),
    ("run limit → blocked", replace(BASE, runs_started=5), Obligation.BLOCKED, Executor.AGENT),
    ("nothing open → synthesize", replace(BASE, pending_cells=0), Obligation.SYNTHESIZE, Executor.INLINE),
    (
        "synthesized → report",
        replace(BASE, pending_cells=0, synthesized=True),
        Obligation.PRESENT_REPORT,
        Executor.AGENT,
    ),
    ("blocker wins", replace(BASE, blocker="fix the key"), Obligation.BLOCKED, Executor.AGENT),
]


@pytest.mark.parametrize(("state", "obligation", "executor"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_state_leads_to_one_obligation(state: PlannerState, obligation: Obligation, executor: Executor) -> None:
    decision = decide(state)
    assert (decision.obligation, decision.executor) == (obligation, executor)
    assert decision.reason
    assert decide(state) == decision


def test_an_inline_obligation_that_changes_nothing_is_churn_and_blocks() -> None:
    history = ((Obligation.DISPATCH, BASE.digest()),)
    decision = decide(BASE, history)
    assert decision.obligation is Obligation.BLOCKED
    assert "left the state unchanged" in decision.reason


def test_too_many_inline_steps_block() -> None:
    history = tuple((Obligation.PLAN, (i,)) for i in range(MAX_INLINE_STEPS))
    assert decide(BASE, history).obligation is Obligation.BLOCKED
