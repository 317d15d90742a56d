"""The obligation loop behind next_step: run every inline obligation, then hand the host one Step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from audit_mcp.core import collector
from audit_mcp.core.config import SessionConfig
from audit_mcp.core.errors import AuditError, ConfigError, InputError, PathError
from audit_mcp.core.fs import inside, normalize_relpath, resolve_inside
from audit_mcp.core.models import HostCapabilities, Step
from audit_mcp.core.progress import Progress, tell
from audit_mcp.engine import hosts
from audit_mcp.engine.lenses import resolve_lenses
from audit_mcp.engine.planner import Decision, Executor, Obligation, PlannerState, decide
from audit_mcp.scheduling.leases import expired_failures
from audit_mcp.store.records import OPEN_STATES, AuditRow, CellKind, CellState
from audit_mcp.store.tx import Tx
from audit_mcp.usecases import deferred, dispatching, merging, reporting, starting, stepping, verifying
from audit_mcp.usecases.workspace import Workspace

_WORK = {
    Obligation.INTAKE: "intake: listing, reading and hashing the repository's files",
    Obligation.PLAN: "plan: building the coverage matrix of files and lenses",
    Obligation.DISPATCH: "dispatch: packing packets and writing their prompts",
    Obligation.PLAN_VERIFICATION: "verification: adding verify cells for the findings that need a second opinion",
    Obligation.INGEST: "ingest: merging the finished run into the coverage matrix",
    Obligation.SYNTHESIZE: "synthesize: deduplicating findings and writing the report",
}


@collector.held
def next_step(
    ws: Workspace,
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
    """Run every inline obligation, then return the one Step that needs the agent.

    ``analyzer_sarif`` (the user's own files, any place) and ``analyzer_files`` (a host's, confined to the
    repository root) add analyzer output (SARIF, bandit or semgrep JSON) to the config's; they are read
    when an audit starts. ``since`` overrides the config's git ref for an audit that starts in this call
    (intake reads it). ``lenses`` replaces the config's ``lenses`` for an audit that starts in this call,
    and is remembered for it. Intake, planning and dispatch build objects by the thousand and free few until
    they end, so the cycle collector waits for the call (``collector.held``).
    """
    arguments = dict(capabilities or {})
    confined = [_confined(ws, i, raw) for i, raw in enumerate(analyzer_files)]
    if client_name:
        arguments["client_name"] = client_name  # remembered with the answers: forecasts plan for this client
    chosen = list(lenses) if lenses else None
    if chosen:
        arguments["lenses"] = chosen
    if since:
        arguments["since"] = since
    try:
        config = ws.config(fresh=new_audit)
        if chosen:
            config = config.model_copy(update={"lenses": chosen})
        if analyzer_sarif or confined:
            # Paths from the command line are relative to the caller's directory; make them absolute.
            given = [*config.analyzers.results, *(str(Path(p).resolve()) for p in analyzer_sarif), *confined]
            analyzers = config.analyzers.model_copy(update={"results": given})
            config = config.model_copy(update={"analyzers": analyzers})
        if since:
            config = config.model_copy(update={"since": since})
        audit_lenses = resolve_lenses(config)
    except ConfigError as exc:
        caps = hosts.resolve(arguments, {}, SessionConfig().host, client_name)
        return stepping.write_step(ws, stepping.blocked(ws, str(exc), caps))
    # The audit this call found: a new audit replaces that one, so callers that race to start one all join the
    # first that does (single-flight), whatever the audit each of them sees later in the loop.
    named = [*analyzer_sarif, *map(Path, confined)]
    if named:
        arguments["analyzers"] = sorted(str(Path(p).resolve()) if Path(p).is_absolute() else str(p) for p in named)
    started_on = _take_answers(ws, arguments, new_audit=new_audit, retry_blocked=retry_blocked)
    _collect_results_files(ws)
    start_fresh = new_audit
    history: list[tuple[Obligation, tuple[object, ...]]] = []
    while True:
        with ws.store.read() as tx:
            audit = tx.current_audit()
            remembered = hosts.remember(arguments, audit.host_caps if audit else {})
            caps = hosts.resolve(arguments, remembered, config.host, client_name, config.scheduler.wave_kind)
            state = _planner_state(ws, tx, audit, config, caps, fresh=start_fresh)
        decision = decide(state, tuple(history))
        if decision.executor is Executor.AGENT:
            step = stepping.write_step(ws, stepping.agent_step(ws, decision, caps, state, config))
            tell(progress, len(history) + 1, None, f"ready: {step.step_kind}")
            return step
        history.append((decision.obligation, state.digest()))
        tell(progress, len(history), None, _WORK.get(decision.obligation, decision.obligation.value))
        try:
            seen = started_on if start_fresh else (audit.audit_id if audit else None)
            _run_inline(ws, decision, config, caps, [lens.lens_id for lens in audit_lenses], arguments, seen)
        except AuditError as exc:
            return stepping.write_step(ws, stepping.blocked(ws, str(exc), caps))
        if decision.obligation is Obligation.INTAKE:
            start_fresh = False


def _take_answers(
    ws: Workspace,
    arguments: Mapping[str, Any],
    *,
    new_audit: bool,
    retry_blocked: bool,
) -> int | None:
    """Record this call's capability answers and a cleared blocker; refuse a new audit over one in flight,
    and an option that only a new audit reads (since, lenses, analyzer output) when it differs from what the
    current audit started with. Returns the current audit's id (``None``: none yet)."""
    with ws.store.write() as tx:
        tx.records_host_only()  # the queue stays as it is: a forecast recorded before this call still holds
        audit = tx.current_audit()
        live = audit is not None and audit.abandoned_at is None
        if audit is not None and live and not new_audit and (refusal := _not_applied(audit, arguments)) is not None:
            raise ConfigError(refusal)
        if audit is not None and live and (new_audit or retry_blocked):
            if new_audit and audit.synthesized_at is None and tx.cells(audit.audit_id, [CellState.ASSIGNED]):
                raise ConfigError(
                    "an audit is still in flight; finish it (or merge its run) before starting a new one, or end "
                    "it with `audit-mcp abandon --reason '...'`"
                )
            if retry_blocked and audit.blocker:
                tx.set_blocker(audit.audit_id, None)
                tx.log(
                    now=ws.now(),
                    audit_id=audit.audit_id,
                    actor="host",
                    action="retry_blocked",
                    detail=audit.blocker,
                    outcome="blocker cleared",
                )
        remembered = audit.host_caps if audit is not None else {}
        if audit is not None:
            tx.set_host_caps(audit.audit_id, hosts.remember(arguments, remembered))
        return audit.audit_id if audit is not None else None


_STARTING_OPTIONS = {
    "since": ("--since", "since", "the files changed since a git ref"),
    "lenses": ("--lenses", "lenses", "the lenses"),
    "analyzers": ("--analyzer-results", "analyzer_results", "analyzer output (SARIF, bandit or semgrep JSON)"),
}


def _not_applied(audit: AuditRow, arguments: Mapping[str, Any]) -> str | None:
    """Why an option this call gives cannot apply to ``audit`` (it is read when an audit starts, and this audit
    started without it, or with another value), with the command that would apply it; ``None`` when it is
    what the audit started with (a resumed ``run`` repeats its options) or not given."""
    for key, (flag, argument, what) in _STARTING_OPTIONS.items():
        given = arguments.get(key)
        if given is None or given == audit.host_caps.get(key):
            continue
        shown = " ".join(given) if isinstance(given, list) else str(given)
        started = audit.host_caps.get(key)
        had = (
            f"with {flag} {' '.join(started) if isinstance(started, list) else started}"
            if started
            else f"without {flag}"
        )
        return (
            f"{flag} {shown} was not applied: {what} are read when an audit starts, and audit {audit.audit_id} "
            f"started {had}. Nothing changed. To start a new audit with it, run `audit-mcp next-step --new-audit "
            f"{flag} {shown}` (over MCP: next_step with new_audit=true and {argument}); to go on with audit "
            f"{audit.audit_id}, leave {flag} out."
        )
    return None


def _confined(ws: Workspace, index: int, raw: str) -> str:
    """A host's analyzer output path, relative to the root, or ``InputError`` when it is not inside it."""
    try:
        absolute = Path(raw).is_absolute()
        if absolute and not inside(ws.root, Path(raw)):
            raise PathError(f"'{raw}' is outside the repository root")
        rel = Path(raw).resolve().relative_to(ws.root.resolve()).as_posix() if absolute else normalize_relpath(raw)
        resolve_inside(ws.root, rel)
    except PathError as exc:
        raise InputError(
            [(f"/analyzer_results/{index}", str(exc))],
            "Nothing changed. Write the analyzer's output inside the repository (for example under .audit-mcp/) "
            "and name it relative to the root, then call next_step again.",
        ) from exc
    return rel


def _collect_results_files(ws: Workspace) -> None:
    """Record the results files that reviewers of the run in flight wrote without submitting them."""
    with ws.store.read() as tx:
        audit = tx.current_audit()
        run = next((r for r in tx.runs(audit.audit_id, plan=False) if r.state == "open"), None) if audit else None
    if run is not None:
        deferred.ingest_deferred(ws, run.run_id, final=False)


def planner_state(
    ws: Workspace, tx: Tx, config: SessionConfig, caps: HostCapabilities, *, fresh: bool = False
) -> PlannerState:
    """The planner's view of the current audit (an abandoned one counts as none)."""
    return _planner_state(ws, tx, tx.current_audit(), config, caps, fresh=fresh)


def _planner_state(
    ws: Workspace, tx: Tx, audit: AuditRow | None, config: SessionConfig, caps: HostCapabilities, *, fresh: bool
) -> PlannerState:
    if audit is None or fresh or audit.abandoned_at:
        return PlannerState(
            False, False, None, None, 0, 0, 0, 0, 0, config.max_runs, caps.can_dispatch_subagents, False
        )
    counts = tx.cell_counts(audit.audit_id)
    by_kind = tx.cell_counts_by_kind(audit.audit_id)
    runs = tx.runs(audit.audit_id, plan=False)
    open_run = next((r for r in runs if r.state == "open"), None)
    packets = tx.packets(open_run.run_id) if open_run else []
    answered = tx.submitted_packet_ids(open_run.run_id) if open_run else set()
    shared = ws.store.dialect == "postgresql"
    if shared:  # a packet its holder reported failed is answered too; lapsed claims go back to the queue
        answered |= {p.packet_id for p in packets if p.state == "failed"}
    submitted = len(answered)
    idle = open_run is None and not any(counts.get(state, 0) for state in OPEN_STATES)
    # Only when nothing is open: what the findings need is read from a synthesis of all of them.
    due = len(verifying.subjects_due(tx, audit.audit_id, config)) if idle and audit.synthesized_at is None else 0
    return PlannerState(
        has_audit=True,
        # With nothing in scope there is nothing to plan: the matrix is empty by design.
        has_cells=bool(counts) or not tx.file_counts(audit.audit_id).get("review", 0),
        blocker=audit.blocker,
        open_run_id=open_run.run_id if open_run else None,
        open_run_packets=len(packets),
        open_run_submitted=submitted,
        pending_cells=counts.get(CellState.PENDING, 0),
        assigned_cells=counts.get(CellState.ASSIGNED, 0),
        runs_started=len(runs),
        max_runs=config.max_runs,
        host_can_dispatch=caps.can_dispatch_subagents,
        synthesized=audit.synthesized_at is not None,
        open_run_expired=len(tx.expired_packet_ids(open_run.run_id, ws.now())) if open_run and not shared else 0,
        pending_context=by_kind.get(CellKind.CONTEXT, {}).get(CellState.PENDING, 0),
        pending_verify=by_kind.get(CellKind.VERIFY, {}).get(CellState.PENDING, 0),
        verification_due=due,
    )


def _run_inline(
    ws: Workspace,
    decision: Decision,
    config: SessionConfig,
    caps: HostCapabilities,
    lenses: list[str],
    arguments: Mapping[str, Any],
    seen: int | None,
) -> None:
    """Run one inline obligation; ``seen`` is the audit the decision was made on (``None``: none yet), so a
    start that another caller won in the meantime joins the winner's audit instead of making a second."""
    match decision.obligation:
        case Obligation.INTAKE:
            starting.intake(ws, config, lenses, arguments, replaces=seen)
        case Obligation.PLAN:
            starting.plan(ws, config)
        case Obligation.DISPATCH:
            dispatching.dispatch(ws, config, caps)
        case Obligation.INGEST:
            with ws.store.read() as tx:
                audit = tx.current_audit()
                run = next(r for r in tx.runs(audit.audit_id, plan=False) if r.state == "open") if audit else None
                expired = expired_failures(tx, run.run_id, ws.now(), config.lease_seconds) if run else []
            if run is not None:
                merging.merge_and_ingest(ws, run.run_id, expired, actor="engine")
        case Obligation.PLAN_VERIFICATION:
            verifying.plan_verification(ws, config)
        case Obligation.SYNTHESIZE:
            reporting.synthesize(ws)
        case _:
            raise AssertionError(f"{decision.obligation} is not an inline obligation")
