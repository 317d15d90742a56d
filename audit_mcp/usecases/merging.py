"""merge_and_ingest: fold a run's accepted submissions and failures into the coverage matrix, then learn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from audit_mcp.core.errors import ConfigError, NotFoundError
from audit_mcp.core.models import MergeSummary
from audit_mcp.core.progress import Progress, tell
from audit_mcp.core.text import clean_text, id_problem
from audit_mcp.engine import drift
from audit_mcp.engine.coverage import completeness, totals
from audit_mcp.engine.ingest import INVALID_RESULTS, ingest_run
from audit_mcp.scheduling.failures import NOT_SUBMITTED, classify
from audit_mcp.scheduling.pacing import pacing_settings, run_outcome
from audit_mcp.store.records import FileRow
from audit_mcp.usecases.deferred import ingest_deferred
from audit_mcp.usecases.rates import learn_from_run
from audit_mcp.usecases.workspace import Workspace

MAX_REQUEUED_LISTED = 50


def merge_and_ingest(
    ws: Workspace,
    run_id: str,
    failures: Sequence[Mapping[str, Any]] | None = None,
    *,
    actor: str = "host",
    progress: Progress | None = None,
) -> MergeSummary:
    """Merge a run once; a second call for the same run changes nothing and says so."""
    reported: dict[str, str] = {}
    for i, item in enumerate(failures or []):
        if not isinstance(item, Mapping) or not isinstance(item.get("packet_id"), str):
            raise ConfigError(f"failures[{i}] must be an object with packet_id and error (the text the host saw)")
        text = item.get("error") or item.get("error_text") or item.get("message") or ""
        reported[item["packet_id"]] = clean_text(str(text)[:4000]) or "failed without an error text"
    if problem := id_problem("run_id", run_id):
        raise ConfigError(problem)
    config = ws.config()
    half_life = pacing_settings(config.scheduler, None).half_life
    now = ws.now()
    tell(progress, 1, 2, f"merging run {run_id} ({len(reported)} packet(s) reported failed)")
    deferred = ingest_deferred(ws, run_id, final=True)
    for packet_id in deferred.ingested:
        reported.pop(packet_id, None)  # its worker failed after writing the answer: the work is done
    changed = drift.detect(ws.root, config, _run_files(ws, run_id))
    with ws.store.write() as tx:
        run = tx.run(run_id)  # the whole plan: what the run was scheduled for
        if run is None:
            raise NotFoundError(f"run {run_id!r} is unknown; take run_id from the current step")
        audit = ws.require_audit(tx)
        packets = tx.packets(run_id)
        unknown = sorted(set(reported) - {p.packet_id for p in packets})
        if unknown:
            raise ConfigError(
                f"failures name packet(s) {unknown} that are not in run {run_id}; its packets are "
                f"{', '.join(p.packet_id for p in packets)}"
            )
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
        submitted = tx.submitted_packet_ids(run_id)
        failed = {
            p.packet_id: _failure(reported.get(p.packet_id), deferred.refused.get(p.packet_id))
            for p in packets
            if p.packet_id not in submitted
        }
        outcome = ingest_run(tx, audit.audit_id, run, packets, failed, config.max_attempts, now)
        usage = [
            (sub[1].get("usage") or {}, p.estimated_tokens)
            for p in packets
            if (sub := tx.submission(p.packet_id)) is not None
        ]
        taught = run_outcome(
            launched=len(packets),
            wave_size=run.wave_size,
            succeeded=outcome.merged,
            reported=reported,
            usage=usage,
            now=ws.clock(),
        )
        if taught.hard_stop:
            tx.set_blocker(
                audit.audit_id,
                f"the model provider refused for a reason waiting cannot fix: "
                f"{taught.hard_stop[:400]}. Raise the spend cap or wait for the usage window to "
                "reset, then call next_step with retry_blocked=true.",
            )
        tx.finish_run(run_id, now)
        outcome.requeued += drift.apply(tx, audit.audit_id, config, changed, now)
        counts = tx.cell_counts(audit.audit_id)
        tx.log(
            now=now,
            audit_id=audit.audit_id,
            actor=actor,
            action="merge_and_ingest",
            detail=f"run {run_id}: {outcome.merged} merged, {outcome.failed} failed, {outcome.covered} "
            f"task(s) covered, {len(outcome.requeued)} requeued",
            outcome="ok",
        )
    learn_from_run(ws, run, taught, half_life)
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
        coverage=totals(counts),
        completeness=completeness(counts),
        next_action="Call next_step now: it hands out what is still open, or writes the report.",
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
    """The manifest rows of the files a run's packets cover."""
    with ws.store.read() as tx:
        run = tx.run(run_id, plan=False)
        if run is None:
            return []
        task_ids = [t for p in tx.packets(run_id) for t in tx.packet_task_ids(p.packet_id)]
        paths = {c.path for c in tx.cells_by_id(run.audit_id, task_ids).values()}
        return [f for path in sorted(paths) if (f := tx.file(run.audit_id, path)) is not None]
