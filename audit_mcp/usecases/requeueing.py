"""requeue: chosen files, lenses, tasks or findings back to review in the next run, with a reason.

The reason is recorded with each cell and shown in the prompt of the next packet that holds it, until a
review of it is merged. Findings already reported stay: the new review adds to them. A cell out in the
open run is left alone (requeue it after that run's merge); a finished audit is reopened, so the next
``next_step`` dispatches the cells and writes a new report.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from audit_mcp.core.errors import ConfigError
from audit_mcp.core.operations import RequeueResult
from audit_mcp.core.text import clean_text
from audit_mcp.engine.selection import Place, choose, requeue_refusal
from audit_mcp.findings.synthesis import synthesize
from audit_mcp.store.records import CellKind, CellState
from audit_mcp.usecases.workspace import Workspace

MAX_REASON_CHARS = 500


def requeue(
    ws: Workspace,
    *,
    reason: str,
    files: Sequence[str] = (),
    lenses: Sequence[str] = (),
    tasks: Sequence[str] = (),
    findings: Sequence[str] = (),
    actor: str = "person",
) -> RequeueResult:
    """Send the chosen cells back to review; the result says which went, which were pending, which stayed."""
    why = clean_text(" ".join(str(reason).split()))
    if not why:
        raise ConfigError("a requeue needs a reason (what the next review should look at); it goes into the prompt")
    if len(why) > MAX_REASON_CHARS:
        raise ConfigError(f"the reason is {len(why)} characters; keep it under {MAX_REASON_CHARS}")
    if not (files or lenses or tasks or findings):
        raise ConfigError("name what to requeue: files, lenses, tasks or findings")
    now = ws.now()
    with ws.store.write() as tx:
        audit = ws.require_audit(tx)
        if audit.abandoned_at:
            raise ConfigError(f"audit {audit.audit_id} was abandoned; start a new one with next_step")
        unknown_lenses = sorted(set(lenses) - set(audit.lenses))
        if unknown_lenses:
            raise ConfigError(f"lens(es) {unknown_lenses} are not in this audit; its lenses are {audit.lenses}")
        places, missing = _places(tx.findings(audit.audit_id), findings)
        cells = tx.cells(audit.audit_id)
        known = {c.task_id for c in cells}
        # Files, lenses and findings name review work; a context or verify task is requeued by its id.
        review = [c for c in cells if c.kind == CellKind.REVIEW]
        chosen = choose(review, files=files, lenses=lenses, tasks=tasks, places=places)
        chosen += choose([c for c in cells if c.kind != CellKind.REVIEW], tasks=tasks)
        not_requeued = {
            t.strip().upper(): "no such task in this audit" for t in tasks if t.strip().upper() not in known
        }
        not_requeued |= {f: "no such finding in this audit (use an id or fingerprint of the report)" for f in missing}
        if not chosen:
            raise ConfigError(
                "nothing to requeue: no cell of this audit matches "
                + ", ".join(f"{k} {list(v)}" for k, v in (("files", files), ("lenses", lenses)) if v)
                + (f"; {not_requeued}" if not_requeued else "")
            )
        reviewable = {f.path for f in tx.files(audit.audit_id) if f.scope == "review"}
        requeued, pending, recorded = [], [], []
        for cell in chosen:
            if refusal := requeue_refusal(cell, cell.path in reviewable):
                not_requeued[cell.task_id] = refusal
                continue
            recorded.append(cell.task_id)
            if cell.state == CellState.PENDING:
                pending.append(cell.task_id)
                continue
            tx.update_cell(audit.audit_id, cell.task_id, state=CellState.PENDING, now=now, attempts=0, reason=None)
            requeued.append(cell.task_id)
        tx.add_requeue(audit.audit_id, recorded, why, actor, now)
        if requeued and audit.synthesized_at:
            tx.set_synthesized(audit.audit_id, None)  # reopened: the next next_step reviews, then reports anew
        tx.log(
            now=now,
            audit_id=audit.audit_id,
            actor=actor,
            action="requeue",
            detail=f"{len(requeued)} task(s) back to review, {len(pending)} already pending, "
            f"{len(not_requeued)} left as they are: {why}",
            outcome="ok" if recorded else "nothing requeued",
        )
    return RequeueResult(
        audit_id=audit.audit_id,
        reason=why,
        requeued=requeued,
        already_pending=pending,
        not_requeued=not_requeued,
        next_action="Call next_step (or `audit-mcp run`): the next run reviews these tasks, and their packet "
        "prompts give your reason."
        if recorded
        else "Nothing was requeued; see not_requeued for why.",
    )


def _places(raw: list[dict[str, Any]], wanted: Sequence[str]) -> tuple[list[Place], list[str]]:
    """Where each named finding (report id like F003, or a fingerprint) is; and the names that match none."""
    if not wanted:
        return [], []
    merged = synthesize(raw).findings
    places, missing = [], []
    for name in wanted:
        key = name.strip()
        found = [f for f in merged if f.finding_id == key.upper() or key.lower() in f.aliases]
        if not found:
            missing.append(name)
        places += [Place(f.file, start, end, tuple(f.lenses)) for f in found for start, end in f.locations]
    return places, missing
