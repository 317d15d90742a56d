"""The whole audit's forecast: every packet still to come, by obligation, with its runs, tokens, wall time and
cost (``forecast_sums``), for ``quota``, ``status``, the Step before the first dispatch, and the report.

What it counts, for the audit's open work:

- the packets of the open run not answered yet, as they were dispatched;
- the context packet, while it is pending, as dispatch packs it;
- review: the pending review cells as dispatch packs them, when they fit one run; past that, estimated by
  filling packets of the same budget in queue order (``batching.fill_estimate``: within a few percent);
- verification: the pending verify cells, in verifier packets of ``MAX_VERIFY_TASKS``; and while review goes
  on, the findings expected at or above the verification threshold, an estimate: those found so far, plus,
  for each open review cell, ``(found + PRIOR_CELLS × prior) / (reviewed + PRIOR_CELLS)``, where the prior
  (``VERIFY_PRIOR``, by threshold) gives way to the audit's own rate as its cells are reviewed.

Before any audit (``quota`` where nothing was audited yet) the repository is read as intake reads it and the
matrix built in memory, nothing written, so the forecast is the one the first step then gives. What the
forecast takes from the packer and the prompts (``Pending``: the review packets, the verifier packets'
shares) is kept in process and recorded in the store under the queue's generation, as the next run's sizes
are (``forecasting``): dispatch records it for the generation it commits, so views read it and load
neither the packer nor the prompts.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from audit_mcp.core.config import SessionConfig, config_label
from audit_mcp.core.models import HostCapabilities
from audit_mcp.findings.model import SEVERITY_RANK
from audit_mcp.scheduling.budget import packet_token_budget
from audit_mcp.store.records import AuditRow, CellKind, CellState
from audit_mcp.store.tx import Tx
from audit_mcp.usecases import memo
from audit_mcp.usecases.forecast_sums import Obligation, Setting, forecast
from audit_mcp.usecases.forecasting import NextRun, packing_key, plan_next_run, remembered_caps
from audit_mcp.usecases.rates import pacing
from audit_mcp.usecases.workspace import Workspace

# Findings at or above each threshold per review cell, before the audit's own rate is known: a guess, and said so.
VERIFY_PRIOR = {"critical": 0.005, "high": 0.02, "medium": 0.06, "low": 0.12, "info": 0.2}
PRIOR_CELLS = 100  # how many reviewed cells the prior weighs as
FORECAST_ACTION = "forecast"  # the ledger entry that keeps the forecast shown with an audit's first dispatch
UNANSWERED = "the context packet has not been answered"  # why review packets carry no threat model yet
_RECORD = "whole:"  # the store's forecast records of ``Pending``, beside the next run's


@dataclass(frozen=True)
class Pending:
    """What a forecast of the whole audit takes from the packer and the prompts: the pending review cells'
    packets, and a verifier packet's parts (its shared prefix, each verification's share, how many a packet
    holds). It holds while the queue's generation stands."""

    review: tuple[int, ...]
    estimated: bool
    verify_prefix: int
    per_verification: int
    verifications_per_packet: int

    def encode(self) -> str:
        return json.dumps({**asdict(self), "review": list(self.review)}, separators=(",", ":"))

    @classmethod
    def decode(cls, body: str) -> Pending:
        doc = json.loads(body)
        return cls(
            tuple(int(t) for t in doc["review"]),
            bool(doc["estimated"]),
            int(doc["verify_prefix"]),
            int(doc["per_verification"]),
            int(doc["verifications_per_packet"]),
        )


def audit_forecast(
    ws: Workspace, config: SessionConfig, caps: HostCapabilities, *, provider: str | None = None
) -> dict[str, Any]:
    """What remains of the current audit, or (where none is under way) what an audit started now would do."""
    with ws.store_if_any() as tx:
        audit = tx.current_audit() if tx is not None else None
        if tx is not None and audit is not None and audit.abandoned_at is None:
            return for_audit(ws, tx, audit, config, caps, provider=provider)
    return before_any(ws, config, caps, provider=provider)


def for_remembered_host(ws: Workspace) -> dict[str, Any]:
    """``audit_forecast`` for the host the current audit remembers (``status`` forecasts for it too)."""
    config = ws.config()
    with ws.store_if_any() as tx:
        audit = tx.current_audit() if tx is not None else None
    return audit_forecast(ws, config, remembered_caps(config, audit.host_caps if audit is not None else {}))


def for_audit(
    ws: Workspace,
    tx: Tx,
    audit: AuditRow,
    config: SessionConfig,
    caps: HostCapabilities,
    *,
    next_run: NextRun | None = None,
    provider: str | None = None,
) -> dict[str, Any]:
    """The forecast of what remains of ``audit``, read inside the caller's transaction; ``next_run`` is the
    next run's forecast when the caller has it already (for the same host)."""
    setting, budget, limit = _setting(ws, config, caps, provider)
    if next_run is None:
        next_run = plan_next_run(ws, tx, audit, config, caps, single=limit == 1, provider=provider, reuse=True)
    by_kind = memo.cell_counts_by_kind(ws.memo, tx, audit.audit_id)

    def count(kind: CellKind, *states: CellState) -> int:
        return sum(by_kind.get(kind, {}).get(state, 0) for state in states)

    out = _open_packets(tx, audit)
    sizes = tuple(p.tokens for p in next_run.sizes.packets)
    whole = next_run.pending_cells == next_run.cells_in_run  # the next run takes every pending cell
    pending = _pending(ws, tx, audit, config, budget, limit)
    opened = (CellState.PENDING, CellState.ASSIGNED)
    tokens: tuple[int, ...] = ()
    if count(CellKind.CONTEXT, CellState.PENDING):
        tokens = sizes if next_run.kind == "context" else (budget,)
    context = Obligation(
        "context", tokens, count(CellKind.CONTEXT, *opened), out["context"], how="as dispatch packs it"
    )
    open_review = count(CellKind.REVIEW, *opened)
    how = _review_how(pending.estimated, budget)
    review = Obligation("review", pending.review, open_review, out["review"], pending.estimated, how)
    verify_pending = count(CellKind.VERIFY, CellState.PENDING)
    expected = 0
    how = "as dispatch packs them"
    if config.verification_pass and open_review and not sum(by_kind.get(CellKind.VERIFY, {}).values()):
        found = _found(ws, tx, audit, config)
        reviewed = count(CellKind.REVIEW, CellState.REVIEWED, CellState.NOT_APPLICABLE)
        expected, how = _expected(config, found, reviewed, open_review, pending)
    verify_open = count(CellKind.VERIFY, *opened)
    if next_run.kind == "verify" and whole and not expected:
        verification = Obligation("verification", sizes, verify_open, out["verify"], how=how)
    else:
        if verify_pending and not expected:
            how = f"{verify_pending} pending verification(s), {pending.verifications_per_packet} to a verifier packet"
        tokens = _verifier_packets(verify_pending + expected, pending, budget)
        estimated = bool(expected or verify_pending)
        verification = Obligation("verification", tokens, verify_open + expected, out["verify"], estimated, how)
    runs = tx.runs(audit.audit_id, plan=False)
    doc = forecast([context, review, verification], setting)
    untouched = not runs or (len(runs) == 1 and runs[0].state == "open" and not tx.submitted_packet_ids(runs[0].run_id))
    doc["scope"] = (
        f"audit {audit.audit_id}, whole (nothing answered yet)"
        if untouched
        else f"what remains of audit {audit.audit_id}"
    )
    return doc


def record_pending(ws: Workspace, tx: Tx, audit: AuditRow, config: SessionConfig, caps: HostCapabilities) -> None:
    """Record, last in a write transaction, what a forecast of the whole audit for the host ``caps`` will take
    from the packer: counted from what the transaction leaves, under the queue's generation its commit gives."""
    _unused, budget, limit = _setting(ws, config, caps, None)
    pending = _count_pending(ws, tx, audit, config, budget, limit)
    tx.record_forecast(
        audit.audit_id, _RECORD + packing_key(budget, limit, config), tx.committed_queue_generation(), pending.encode()
    )


def record_first(ws: Workspace, audit_id: int, doc: dict[str, Any]) -> None:
    """Keep the forecast shown with an audit's first dispatch in its ledger (once), for the report to set what
    was used beside it."""
    with ws.store.read() as tx:
        if tx.ledger_data(audit_id, FORECAST_ACTION):
            return  # kept already: the first dispatch's step is handed out again until a packet is answered
    with ws.store.write() as tx:
        tx.records_answer_only()  # the log only: forecasts of the next run hold
        if tx.ledger_data(audit_id, FORECAST_ACTION):
            return
        tx.log(
            now=ws.now(),
            audit_id=audit_id,
            actor="engine",
            action=FORECAST_ACTION,
            detail=f"{doc['packets']} packet(s) in {doc['runs']} run(s), {doc['time_range']}",
            outcome="ok",
            data=doc,
        )


def before_any(
    ws: Workspace, config: SessionConfig, caps: HostCapabilities, *, provider: str | None = None
) -> dict[str, Any]:
    """What an audit started now would do: the repository read as intake reads it, the matrix and the
    packets built in memory; nothing is written."""
    # Loaded here only: a forecast before any audit reads the repository and packs it, as the first step would.
    from audit_mcp.engine.batching import fill_estimate, head_of_queue
    from audit_mcp.engine.codemap.packet_map import map_tokens
    from audit_mcp.engine.coverage import build_cells, build_matrix
    from audit_mcp.engine.intake import build_manifest
    from audit_mcp.engine.lenses import resolve_lenses
    from audit_mcp.engine.opinion_prompts import threat_model_block, verify_prefix
    from audit_mcp.engine.packet_prompts import estimate_tokens, packet_prompt_prefix
    from audit_mcp.engine.packets import group_cells, pack_units
    from audit_mcp.usecases import code_facts
    from audit_mcp.usecases.context import context_row, first_state, overview_of
    from audit_mcp.usecases.packing import context_packet_tokens

    setting, budget, limit = _setting(ws, config, caps, provider)
    cache = code_facts.read(ws, config, looking=True)  # a forecast writes nothing
    manifest = build_manifest(ws.root, ws.artifacts_dir, config, config_label(ws.root, ws.config_path), cache)
    files = sorted(manifest.files, key=lambda f: f.path)
    by_path = {f.path: f for f in files}
    matrix = build_matrix(files, config)
    counted = [_Counted(path, start, end, len(matrix.lens_sets[i])) for path, start, end, _hash, i in matrix.units]
    cells = sum(u.count for u in counted)
    state, reason = first_state(files, config)
    context = Obligation("context", how="as dispatch packs it")
    if state is CellState.PENDING:
        edges = [(e.src, e.dst, e.weight) for e in manifest.code_map.edges]
        overview = overview_of(ws, files, edges, [], budget, entries=manifest.code_map.entries)
        tokens: tuple[int, ...] = (context_packet_tokens(ws, context_row(state, reason), overview),)
        context = Obligation("context", tokens, 1, how="as dispatch packs it")
    threat = threat_model_block(None, reason or UNANSWERED)
    # As dispatch counts it: the shared prefix, and room for the packet's own part of the code map.
    prefix = estimate_tokens(packet_prompt_prefix(resolve_lenses(config), threat)) + map_tokens(budget)
    room = max(1, budget - prefix)
    filled = fill_estimate(counted, by_path, room=room)
    estimated = len(filled) > limit
    if estimated:
        tokens = tuple(prefix + t for t, _ in filled)
    else:  # one run's worth: packed as dispatch packs it, its cells built
        units = group_cells(build_cells(files, config))
        head = head_of_queue(units, by_path, packets=limit, room=room)
        paths = {u.path for u in head}
        edges = [(e.src, e.dst, e.weight) for e in manifest.code_map.edges if e.src in paths and e.dst in paths]
        plans = pack_units(head, by_path, edges, budget=budget, prefix_tokens=prefix, limit=limit)
        tokens = tuple(p.estimated_tokens for p in plans)
    review = Obligation("review", tokens, cells, estimated=estimated, how=_review_how(estimated, budget))
    pending = Pending(tokens, estimated, estimate_tokens(verify_prefix(threat)), *_verifier_shares())
    expected, how = _expected(config, 0, 0, cells, pending) if config.verification_pass else (0, "the pass is off")
    verify = _verifier_packets(expected, pending, budget)
    verification = Obligation("verification", verify, expected, estimated=bool(expected), how=how)
    doc = forecast([context, review, verification], setting)
    doc["scope"] = (
        f"an audit that would start now ({len(manifest.in_scope)} file(s) in scope, {cells} review cell(s)); "
        "nothing was written"
    )
    return doc


class _Counted:
    """A unit of the matrix with the number of its cells, as filling packets counts it (no cell is built)."""

    __slots__ = ("count", "end_line", "path", "start_line")
    facts = None  # its file's facts are looked up in the manifest

    def __init__(self, path: str, start_line: int, end_line: int, count: int) -> None:
        self.path, self.start_line, self.end_line, self.count = path, start_line, end_line, count


def _setting(
    ws: Workspace, config: SessionConfig, caps: HostCapabilities, provider: str | None
) -> tuple[Setting, int, int]:
    limits, learned, _key, settings = pacing(ws, config, caps, provider)
    budget = packet_token_budget(limits, learned, config.max_packet_tokens, caps.max_active_subagents)
    limit = 1 if caps.can_dispatch_subagents is False else config.max_packets_per_run
    source, prices = config.prices.for_model(limits.model)
    setting = Setting(
        limits=limits,
        learned=learned,
        host_cap=caps.max_active_subagents,
        host_kind=settings.wave_kind,
        now=ws.clock(),
        half_life=settings.half_life,
        max_packet_tokens=config.max_packet_tokens,
        max_packets_per_run=limit,
        prices=prices,
        price_source=source,
        currency=config.prices.currency,
    )
    return setting, budget, limit


def _open_packets(tx: Tx, audit: AuditRow) -> dict[str, tuple[int, ...]]:
    """The packets of the open run not answered yet, by kind, as dispatched."""
    out: dict[str, list[int]] = defaultdict(list)
    run = next((r for r in tx.runs(audit.audit_id, plan=False) if r.state == "open"), None)
    if run is not None:
        answered = tx.submitted_packet_ids(run.run_id)
        for packet in tx.packets(run.run_id):
            if packet.packet_id not in answered:
                out[packet.kind].append(packet.estimated_tokens)
    return {kind.value: tuple(out[kind.value]) for kind in CellKind}


def _review_how(estimated: bool, budget: int) -> str:
    if not estimated:
        return "as dispatch packs them"
    return (
        f"estimated: more than one run's worth, filled into packets of {budget:,} tokens in queue order "
        "(dispatch packs each run's as it opens it)"
    )


def _pending(ws: Workspace, tx: Tx, audit: AuditRow, config: SessionConfig, budget: int, limit: int) -> Pending:
    """``Pending`` for what the transaction reads: kept in process, else recorded in the store, else counted now
    (and recorded, unless another writer holds the store)."""
    generation = tx.queue_generation()
    key = _RECORD + packing_key(budget, limit, config)

    def recorded_or_counted() -> Pending:
        body = tx.recorded_forecast(audit.audit_id, key, generation[1])
        if body is not None:
            return Pending.decode(body)
        counted = _count_pending(ws, tx, audit, config, budget, limit)
        ws.store.aside(lambda w: w.record_forecast(audit.audit_id, key, generation[1], counted.encode()))
        return counted

    return ws.memo.get("whole_pending", (generation, audit.audit_id, key), recorded_or_counted)


def _count_pending(ws: Workspace, tx: Tx, audit: AuditRow, config: SessionConfig, budget: int, limit: int) -> Pending:
    # The packer and the prompts, for a count no record holds: views that read the record load neither.
    from audit_mcp.engine.batching import fill_estimate
    from audit_mcp.engine.opinion_prompts import verify_prefix
    from audit_mcp.engine.packet_prompts import estimate_tokens
    from audit_mcp.usecases.context import threat_model_text
    from audit_mcp.usecases.packing import pack_review, review_prefix

    prefix = estimate_tokens(review_prefix(tx, audit, config))
    queue = tx.queue_units(audit.audit_id)
    try:
        filled = fill_estimate(queue, tx.files_in_order(audit.audit_id), room=max(1, budget - prefix))
    finally:
        queue.close()
    estimated = len(filled) > limit
    if estimated:
        review = tuple(prefix + t for t, _ in filled)
    else:
        review = tuple(p.estimated_tokens for p in pack_review(ws, tx, audit, config, budget, limit)) if filled else ()
    verify = estimate_tokens(verify_prefix(threat_model_text(tx, audit.audit_id)))
    return Pending(review, estimated, verify, *_verifier_shares())


def _verifier_shares() -> tuple[int, int]:
    """Each verification's share of a verifier packet (its finding, and half a file read), and how many
    verifications a packet holds."""
    from audit_mcp.engine.opinion_packets import MAX_FILE_TOKENS, MAX_VERIFY_TASKS, TOKENS_PER_VERIFICATION

    return TOKENS_PER_VERIFICATION + MAX_FILE_TOKENS // 2, MAX_VERIFY_TASKS


def _found(ws: Workspace, tx: Tx, audit: AuditRow, config: SessionConfig) -> int:
    """Findings this audit's review reported so far at or above the verification threshold, one per place
    (those carried forward from an earlier audit came with their verifications)."""
    threshold = SEVERITY_RANK[config.verify_severity]

    def counted() -> int:
        places = {
            (f.get("file"), f.get("start_line"))
            for f in tx.findings(audit.audit_id)
            if SEVERITY_RANK.get(str(f.get("severity")), 99) <= threshold and not f.get("carried_from")
        }
        return len(places)

    return ws.memo.get("findings_to_verify", (tx.queue_generation(), audit.audit_id, threshold), counted)


def _expected(config: SessionConfig, found: int, reviewed: int, open_cells: int, pending: Pending) -> tuple[int, str]:
    """Findings expected to need a verifier, and how that was reckoned."""
    prior = VERIFY_PRIOR[config.verify_severity]
    rate = (found + PRIOR_CELLS * prior) / (reviewed + PRIOR_CELLS)
    expected = found + round(rate * open_cells)
    return expected, (
        f"{found} finding(s) at or above {config.verify_severity} so far in {reviewed} reviewed cell(s), plus "
        f"{rate:.3f} a cell for {open_cells} open review cell(s) (a prior of {prior} a cell, weighed as "
        f"{PRIOR_CELLS} cells against what this audit finds), in verifier packets of "
        f"{pending.verifications_per_packet} verifications of ~{pending.per_verification:,} tokens each"
    )


def _verifier_packets(verifications: int, pending: Pending, budget: int) -> tuple[int, ...]:
    """Verifier packets for ``verifications``: full packets, then the rest."""
    per = pending.verifications_per_packet
    counts = [per] * (verifications // per) + ([verifications % per] if verifications % per else [])
    return tuple(min(budget, pending.verify_prefix + n * pending.per_verification) for n in counts)
