"""merge_and_ingest: fold a run's accepted submissions and failures into the coverage matrix, then learn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from audit_mcp.core import collector
from audit_mcp.core.errors import InputError, NotFoundError, StateError
from audit_mcp.core.models import MergeSummary, RequeuedTask
from audit_mcp.core.progress import Progress, tell
from audit_mcp.core.text import id_problem
from audit_mcp.engine import drift
from audit_mcp.engine.coverage import completeness, totals
from audit_mcp.engine.ingest import HELD, INVALID_RESULTS, ingest_run
from audit_mcp.scheduling.failures import NOT_SUBMITTED, classify
from audit_mcp.scheduling.pacing import run_outcome
from audit_mcp.scheduling.worker_output import WorkerReport, describe
from audit_mcp.store.records import CellKind, CellState, FileRow, PacketRow
from audit_mcp.store.tx import Tx
from audit_mcp.usecases import claiming, history, reporting, verifying
from audit_mcp.usecases.deferred import ingest_deferred
from audit_mcp.usecases.forecasting import forecast_for_remembered_host
from audit_mcp.usecases.inflight import checked_failures, in_flight, learn_measured_usage
from audit_mcp.usecases.rates import learn_from_run
from audit_mcp.usecases.usage import usage_data
from audit_mcp.usecases.workspace import Workspace

MAX_REQUEUED_LISTED = 50
HELD_TEXT = (
    "held back: its first call cannot fit the model's input limit as now known; packed again, smaller, for the "
    "next run (not counted as an attempt)"
)


@collector.held
def merge_and_ingest(
    ws: Workspace,
    run_id: str,
    failures: Sequence[Mapping[str, Any]] | None = None,
    *,
    actor: str = "host",
    progress: Progress | None = None,
    printed: Mapping[str, WorkerReport] | None = None,
) -> MergeSummary:
    """Merge a run once; a second call for the same run changes nothing and says so.

    The failures are checked before anything changes: a bad one refuses the whole call (``InputError``).
    ``printed`` is what workers that did their packet printed about usage and rate limits (``audit-mcp run``
    reads it from their output): their usage figures win over the submitted ones key by key (the agent
    measured them), and their rate-limit text is learned as a failed worker's error text is. The cycle
    collector waits for the call, as for ``next_step``: a merge builds an object per task of the run.
    """
    if problem := id_problem("run_id", run_id):
        raise InputError([("/run_id", problem)], "Nothing changed. Take run_id from the current step.")
    reported = checked_failures(failures)
    if not ws.has_state():
        raise NotFoundError(_unknown(ws, run_id, "no audit has started there"))
    with ws.store.read() as tx:
        run_found = tx.run(run_id, plan=False)
        if run_found is None:
            raise NotFoundError(_unknown(ws, run_id, f"the audit of {ws.root}"))
        if (stale := ws.superseded_audit(tx, run_found)) is not None:
            raise StateError(stale)
        packet_ids = [p.packet_id for p in tx.packets(run_id)]
    unknown = [(i, item["packet_id"]) for i, item in enumerate(failures or []) if item["packet_id"] not in packet_ids]
    if unknown:
        raise InputError(
            [(f"/failures/{i}/packet_id", f"packet {pid!r} is not in run {run_id}") for i, pid in unknown],
            f"Nothing changed. The packets of run {run_id} are {', '.join(packet_ids)}; report only those.",
        )
    if claiming.shared(ws):
        if (waiting := _wait_for_holders(ws, run_id, reported)) is not None:
            return waiting
        with ws.store.read() as tx:
            reported = tx.reported_errors(run_id) | reported
    config = ws.config()
    now = ws.now()
    tell(progress, 1, 2, f"merging run {run_id} ({len(reported)} packet(s) reported failed)")
    deferred = ingest_deferred(ws, run_id, final=True)
    for packet_id in deferred.ingested:
        reported.pop(packet_id, None)  # its worker failed after writing the answer: the work is done
    changed = drift.detect(ws.root, config, _run_files(ws, run_id))
    with ws.store.write() as tx:
        run = tx.run(run_id, plan=False)
        if run is None:
            raise NotFoundError(_unknown(ws, run_id, f"the audit of {ws.root}"))
        if (stale := ws.superseded_audit(tx, run)) is not None:
            raise StateError(stale)  # its task ids name cells of its own audit, never the current one's
        audit = ws.require_audit(tx)
        packets = tx.packets(run_id)
        if run.state != "open":
            counts = tx.cell_counts(audit.audit_id)
            return MergeSummary(
                run_id=run_id,
                already_merged=True,
                packets_merged=0,
                packets_failed=0,
                tasks_covered=0,
                tasks_requeued=0,
                tasks_failed=0,
                requeued=[],
                coverage=totals(counts),
                completeness=completeness(counts),
                next_action="This run was already merged; nothing changed. Call next_step.",
            )
        # Failures reported while the run went (plan_status) were learned then; the merge's list adds the rest.
        early = tx.reported_failures(run_id)
        reported = {**early, **reported}
        submitted = tx.submitted_packet_ids(run_id)
        failed = {
            p.packet_id: _failure(reported.get(p.packet_id), deferred.refused.get(p.packet_id))
            for p in packets
            if p.packet_id not in submitted
        }
        flight = in_flight(ws, config, tx, run_id)
        for packet_id in flight.live((), ws.clock()).held if flight is not None else []:
            if packet_id in failed and packet_id not in reported:
                failed[packet_id] = (HELD, HELD_TEXT)
        accepted = tx.run_merge_parts(run_id)
        outcome = ingest_run(tx, audit.audit_id, run, packets, failed, config.max_attempts, now, accepted)
        settled = history.settle_earlier(tx, audit.audit_id, run_id, history.answered_tasks(accepted), ws.read_lines)
        seen = {pid: r for pid, r in (printed or {}).items() if pid in submitted}
        usage: list[dict[str, Any]] = []
        measured: list[tuple[dict[str, Any], int]] = []  # what successful workers printed, learned below
        for p in packets:
            if (sub := accepted.get(p.packet_id)) is not None:
                printed_usage = seen[p.packet_id].usage if p.packet_id in seen else {}
                usage.append({**(sub.get("usage") or {}), **printed_usage})
                if printed_usage:
                    measured.append((dict(printed_usage), p.estimated_tokens))
        taught = run_outcome(
            launched=len(packets),
            wave_size=run.wave_size,
            succeeded=outcome.merged,
            reported={p: reported[p] for p in failed if p in reported},
            usage=usage,
            now=ws.clock(),
            printed={pid: r.text for pid, r in seen.items() if r.text},
            learned_already=set(early),
        )
        told = {pid: line for pid, r in seen.items() if (line := describe(r, ws.clock()))}
        if taught.hard_stop:
            tx.set_blocker(
                audit.audit_id,
                f"the model provider refused for a reason waiting cannot fix: "
                f"{taught.hard_stop[:400]}. Raise the spend cap or wait for the usage window to "
                "reset, then call next_step with retry_blocked=true "
                "(on the command line: next-step --retry-blocked, or run --retry-blocked).",
            )
        tx.finish_run(run_id, now)
        tx.serve_requeues(audit.audit_id, run_id)
        outcome.requeued += drift.apply(tx, audit.audit_id, config, changed, now)
        # The last review merged: the findings that need a second opinion join the matrix now, so the
        # coverage this merge reports already counts them.
        verifications = (
            verifying.plan_in(tx, audit.audit_id, config, now) if verifying.review_done(tx, audit.audit_id) else 0
        )
        if _packs_as_dispatched(tx, audit.audit_id, packets, outcome.requeued, verifications, changed):
            tx.carry_forecasts(audit.audit_id, tx.queue_generation()[1], tx.committed_queue_generation())
        counts = tx.cell_counts(audit.audit_id)
        tx.log(
            now=now,
            audit_id=audit.audit_id,
            actor=actor,
            action="merge_and_ingest",
            detail=f"run {run_id}: {outcome.merged} merged, {outcome.failed} failed, {outcome.covered} "
            f"task(s) covered, {len(outcome.requeued)} requeued"
            + (f"; successful workers printed usage or rate limits for {', '.join(sorted(told))}" if told else "")
            + (
                "; earlier findings: " + ", ".join(f"{n} {how.replace('_', ' ')}" for how, n in sorted(settled.items()))
                if settled
                else ""
            ),
            outcome="ok",
            data=usage_data(run_id, usage, outcome.merged, {p: kind for p, (kind, _) in failed.items()}),
        )
    if flight is not None:  # usage was learned as each packet was submitted; printed usage is learned now
        for numbers, estimated_tokens in measured:
            learn_measured_usage(ws, flight, estimated_tokens, numbers)
        learn_from_run(ws, flight.context.key, taught, flight.learning(ws.clock()))
    if actor == "host":  # the tool's or the command's: what the host calls next (status, quota) packs nothing
        forecast_for_remembered_host(ws, config)  # (the headless runner and the engine dispatch at once instead)
    reporting.write_page(ws)  # report/report.html shows the audit as this merge leaves it
    still = [r for r in outcome.requeued if r.state == "pending"]
    tell(progress, 2, 2, f"merged run {run_id}: {outcome.covered} task(s) covered, {len(still)} requeued")
    return MergeSummary(
        run_id=run_id,
        packets_merged=outcome.merged,
        packets_failed=outcome.failed,
        tasks_covered=outcome.covered,
        tasks_requeued=len(still),
        tasks_failed=len(outcome.requeued) - len(still),
        requeued=outcome.requeued[:MAX_REQUEUED_LISTED],
        failure_kinds=outcome.kinds,
        ingested_from_files=deferred.ingested,
        invalid_results_files=deferred.refused,
        unissued_results_files=deferred.unissued,
        worker_output=told,
        coverage=totals(counts),
        completeness=completeness(counts),
        verifications_planned=verifications,
        next_action="Call next_step now: it hands out what is still open"
        + (f" (including {verifications} verification task(s) just added)" if verifications else "")
        + ", or writes the report.",
    )


def _packs_as_dispatched(
    tx: Tx,
    audit_id: int,
    packets: Sequence[PacketRow],
    requeued: Sequence[RequeuedTask],
    verifications: int,
    changed: Sequence[drift.Drift],
) -> bool:
    """Whether the next run packs as it did when this run was dispatched, so that the forecast recorded then
    holds after this merge: a run of review packets (a context packet's answer is the threat model every
    review prompt starts with) whose every cell settled, none back in the queue, no file changed, no cell
    added, and review still next (the verification queue reads the findings, which a merge adds to)."""
    if requeued or verifications or not all(d.same_bytes for d in changed):
        return False
    if any(p.kind != CellKind.REVIEW for p in packets):
        return False
    by_kind = tx.cell_counts_by_kind(audit_id)
    pending = {kind: by_kind.get(kind, {}).get(CellState.PENDING, 0) for kind in CellKind}
    return bool(pending[CellKind.REVIEW]) and not pending[CellKind.CONTEXT]


def _wait_for_holders(ws: Workspace, run_id: str, reported: dict[str, str]) -> MergeSummary | None:
    """In a shared store a run is merged once every packet is in: before that, a host's merge records the
    failures of the packets it holds (and no other host's) and says how many packets the run waits for."""
    me = claiming.host_id(ws)
    with ws.store.write() as tx:
        run = tx.run(run_id, plan=False)
        if run is None or run.state != "open":
            return None
        submitted = tx.submitted_packet_ids(run_id)
        recorded = 0
        for claim in tx.claims(run_id):
            error = reported.get(claim.packet_id)
            if error is not None and claim.packet_id not in submitted and claim.holder in (None, me):
                tx.give_up_packet(claim.packet_id, error)
                recorded += 1
        waiting = [c.packet_id for c in tx.claims(run_id) if c.state == "issued" and c.packet_id not in submitted]
        if not waiting:
            if not recorded:
                tx.records_answer_only()  # it wrote nothing: the queue's generation (and its forecasts) stand
            return None
        counts = tx.cell_counts(run.audit_id)
        tx.log(
            now=ws.now(),
            audit_id=run.audit_id,
            actor="host",
            action="merge_and_ingest",
            detail=f"run {run_id}: {recorded} failure(s) recorded by {me}; {len(waiting)} packet(s) still out",
            outcome="waiting",
        )
    return MergeSummary(
        run_id=run_id,
        packets_merged=0,
        packets_failed=recorded,
        tasks_covered=0,
        tasks_requeued=0,
        tasks_failed=0,
        requeued=[],
        waiting_packets=len(waiting),
        coverage=totals(counts),
        completeness=completeness(counts),
        next_action=f"Recorded {recorded} failure(s). Run {run_id} still has {len(waiting)} packet(s) held by "
        "other hosts or waiting for a claim; it is merged once every packet is in. Call next_step now: it hands "
        "this host more packets, or says to wait.",
    )


def _failure(reported: str | None, refused_file: str | None) -> tuple[str, str]:
    """A failed packet's kind (from the error text the host saw, or its refused results file) and its text."""
    if refused_file is None:
        text = reported or NOT_SUBMITTED
        return classify(text).kind, text
    if reported is None:
        return INVALID_RESULTS, refused_file
    kind = classify(reported).kind  # an error the host saw (say, an expired key) outranks a half-written file
    return (INVALID_RESULTS if kind == "other" else kind), f"{refused_file}; the host reported: {reported}"


def _run_files(ws: Workspace, run_id: str) -> list[FileRow]:
    """The manifest rows of the files a run's packets cover (one query)."""
    with ws.store.read() as tx:
        run = tx.run(run_id, plan=False)
        return [] if run is None else tx.files_at(run.audit_id, tx.run_paths(run_id))


def _unknown(ws: Workspace, run_id: str, what: str) -> str:
    return (
        f"run {run_id!r} is unknown in {ws.artifacts_dir} ({what}); take run_id from the current step, and "
        "pass the --root (or --artifacts-dir) of the audit that dispatched it"
    )
