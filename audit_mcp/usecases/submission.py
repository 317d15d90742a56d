"""submit_packet: check one packet's results against its tasks and the real files, and record them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from audit_mcp.core.models import Problem, Receipt
from audit_mcp.core.text import capped, clean_text, id_problem
from audit_mcp.engine.checks import MAX_PAYLOAD_CHARS, STRUCTURAL, decode_json, value_problems
from audit_mcp.engine.checks import Problem as ProblemRecord
from audit_mcp.engine.ingest import merge_parts
from audit_mcp.engine.validation import PacketValidator
from audit_mcp.scheduling.leases import superseded_message
from audit_mcp.store.records import Cell, CellKind, Lead, PacketRow
from audit_mcp.usecases import claiming
from audit_mcp.usecases.inflight import learn_from_usage
from audit_mcp.usecases.verifying import claimed, current_synthesis
from audit_mcp.usecases.workspace import Workspace, iso

if TYPE_CHECKING:
    from audit_mcp.engine.opinion_validation import ContextValidator, VerifyValidator


def _refuse(run_id: str, packet_id: str, location: str, message: str) -> Receipt:
    return Receipt(
        accepted=False,
        run_id=run_id,
        packet_id=packet_id,
        errors=[Problem(location=location, message=message)],
        next_action="Fix the error above and submit again; nothing was recorded.",
    )


def submit_packet(
    ws: Workspace,
    run_id: str,
    packet_id: str,
    results: Any,
    usage: Any = None,
    *,
    origin: str | None = None,
    dry_run: bool = False,
) -> Receipt:
    """The receipt for one submission: accepted and recorded, or refused with every error and its fix.

    ``origin`` names the results file a submission was ingested from (the ledger says so). With
    ``dry_run`` nothing is recorded and the receipt is the one a real submission would get now.
    """
    for name, value in (("run_id", run_id), ("packet_id", packet_id)):
        if problem := id_problem(name, value):
            return _refuse(clean_text(str(run_id)), clean_text(str(packet_id)), f"/{name}", problem)
    if isinstance(results, str | bytes):
        if len(results) > MAX_PAYLOAD_CHARS * (4 if isinstance(results, bytes) else 1):
            return _refuse(
                run_id,
                packet_id,
                "/results",
                f"the results are {len(results)} {'bytes' if isinstance(results, bytes) else 'characters'}; the "
                f"limit is {MAX_PAYLOAD_CHARS} characters; shorten texts and evidence",
            )
        results, problem = decode_json(results)
        if problem is not None:
            return _refuse(run_id, packet_id, "/results", f"the results cannot be read: {problem}")
    if isinstance(results, dict) and "results" in results:
        usage = usage if usage is not None else results.get("usage")
        results = results["results"]
    problems, size = value_problems(results, "/results")
    if usage is not None:
        problems += value_problems(usage, "/usage")[0]
    if any(message.startswith(STRUCTURAL) for _, message in problems):
        # Too deep or too many values: nothing past this is read, so these are all the errors there are.
        return Receipt(
            accepted=False,
            run_id=run_id,
            packet_id=packet_id,
            errors=[Problem(location=loc, message=msg) for loc, msg in capped(problems, "errors")],
            next_action="Nothing was recorded. Send plain JSON (finite numbers, UTF-8 text) and submit again.",
        )
    if size > MAX_PAYLOAD_CHARS:
        return _refuse(
            run_id,
            packet_id,
            "/results",
            f"the results are over {MAX_PAYLOAD_CHARS} characters; shorten texts and evidence",
        )
    if not ws.has_state():
        return _refuse(run_id, packet_id, "/run_id", _unknown_run(ws, run_id, "no audit was ever started there"))
    with ws.store.read() as tx:
        run = tx.run(run_id, plan=False)
        if run is None:
            return _refuse(run_id, packet_id, "/run_id", _unknown_run(ws, run_id, f"the audit of {ws.root}"))
        packet = tx.packet(packet_id)
        if packet is None or packet.run_id != run_id:
            ids = ", ".join(p.packet_id for p in tx.packets(run_id))
            return _refuse(
                run_id, packet_id, "/packet_id", f"packet {packet_id!r} is not in run {run_id}; its packets are {ids}"
            )
        if (stale := ws.superseded_audit(tx, run)) is not None:
            return _refuse(run_id, packet_id, "/run_id", stale)
        if run.state != "open":
            if run.state == "abandoned":
                return _refuse(
                    run_id,
                    packet_id,
                    "/run_id",
                    f"run {run_id} belongs to an audit that was abandoned; nothing more is recorded for it. "
                    "Call next_step for the current work",
                )
            return _refuse(run_id, packet_id, "/run_id", superseded_message(tx, run, packet_id))
        task_ids = tx.packet_task_ids(packet_id)
        cells = list(tx.cells_by_id(run.audit_id, task_ids).values())
        previous = tx.submission(packet_id)
        leads = tx.leads(run.audit_id, packet_id)

    def in_manifest(path: str) -> bool:
        with ws.store.read() as tx:
            return tx.has_file(run.audit_id, path)

    outcome = _validator(ws, run.audit_id, packet, cells, leads, in_manifest).validate(results, usage)
    # Every problem in one refusal: the values that are not plain JSON text or numbers, then what the checks of
    # shape, files, lines and evidence found elsewhere (at a place both name, the first says it better).
    if problems:
        named = {location for location, _ in problems}
        rest = [e for e in outcome.errors if e.location not in named]
        outcome.errors[:] = [*(ProblemRecord(loc, msg) for loc, msg in problems), *rest]
    warnings = [
        Problem(location=loc, message=msg)
        for loc, msg in capped([(w.location, w.message) for w in outcome.warnings], "warnings")
    ]
    if not outcome.accepted:
        return Receipt(
            accepted=False,
            run_id=run_id,
            packet_id=packet_id,
            errors=[
                Problem(location=loc, message=msg)
                for loc, msg in capped([(e.location, e.message) for e in outcome.errors], "errors")
            ],
            warnings=warnings,
            next_action="Nothing was recorded. Fix every error above and call submit_packet again with the "
            "whole corrected results.",
        )
    payload = {"results": outcome.results, "usage": outcome.usage}
    text = json.dumps(payload, sort_keys=True)  # what is stored, and what the digest is of
    digest = hashlib.sha256(text.encode()).hexdigest()
    covered = sum(1 for r in outcome.results if r["status"] != "could_not_review")
    kept = sum(len(r.get("findings", [])) for r in outcome.results)
    duplicate = previous is not None and previous[0] == digest
    if dry_run:
        return _dry_run(run_id, packet_id, previous is not None and not duplicate, duplicate, warnings, outcome.results)
    if not duplicate:
        with ws.store.write() as tx:
            tx.records_answer_only()  # the queue, the manifest and the runs stay as they are: forecasts hold
            run_now = tx.run(run_id, plan=False)
            if run_now is not None and (stale := ws.superseded_audit(tx, run_now)) is not None:
                return _refuse(run_id, packet_id, "/run_id", stale)
            if run_now is None or run_now.state != "open":
                return _refuse(
                    run_id,
                    packet_id,
                    "/run_id",
                    f"run {run_id} was merged while this submission was checked; call next_step",
                )
            if claiming.shared(ws):
                me = claiming.host_id(ws)
                claim = tx.claim_of(packet_id, lock=True)  # no other host takes it until this commits
                if claim is not None and claim.holder not in (None, me):
                    return _refuse(run_id, packet_id, "/packet_id", claiming.holder_message(claim, me))
                lease = ws.config().shared.claim_lease_seconds
                tx.renew_claims(run_id, me, iso(ws.clock() + timedelta(seconds=lease)))
            current = tx.submission(packet_id)
            # The same submission may have committed while this one was checked: then it is one submission.
            duplicate = current is not None and current[0] == digest
            replaced = current is not None and not duplicate
            if not duplicate:
                kinds = {c.task_id: c.kind for c in cells}
                parts = merge_parts(outcome.results, outcome.usage, kinds, (c.path for c in cells))
                tx.put_submission(packet_id, run_id, digest, text, ws.now(), origin, parts=parts)
                tx.set_packet_state(packet_id, "submitted")
                tx.log(
                    now=ws.now(),
                    audit_id=run_now.audit_id,
                    actor="engine" if origin else "subagent",
                    action="submit_packet",
                    detail=f"{packet_id}: {covered} task(s) covered, {kept} finding(s)"
                    f"{f'; ingested from file {origin}' if origin else ''}"
                    f"{' (replaced an earlier submission)' if replaced else ''}",
                    outcome="accepted",
                    data={
                        "run_id": run_id,
                        "packet_id": packet_id,
                        **({"usage": outcome.usage} if outcome.usage else {}),
                    },
                )
        if replaced:
            warnings.append(Problem(location="/", message="this submission replaced the packet's earlier accepted one"))
        elif outcome.usage:
            # Recorded first: the usage teaches the scheduler now, while the run is still going.
            learn_from_usage(ws, run_id, packet.estimated_tokens, outcome.usage)
    return Receipt(
        accepted=True,
        run_id=run_id,
        packet_id=packet_id,
        duplicate=duplicate,
        warnings=warnings,
        tasks_covered=covered,
        tasks_open=len(outcome.results) - covered,
        findings_kept=kept,
        next_action="Accepted. Your packet is done; stop here."
        if not duplicate
        else "Already accepted with identical content; nothing changed. Your packet is done.",
    )


def _validator(
    ws: Workspace,
    audit_id: int,
    packet: PacketRow,
    cells: list[Cell],
    leads: list[Lead],
    in_manifest: Callable[[str], bool],
) -> PacketValidator | ContextValidator | VerifyValidator:
    """The checks for the packet's kind: a review, the threat model, or verdicts."""
    if packet.kind not in (CellKind.CONTEXT, CellKind.VERIFY):
        with ws.store.read() as tx:
            rows = tx.earlier_findings(audit_id, [c.task_id for c in cells])
        earlier: dict[str, set[str]] = {}
        for e in rows:
            earlier.setdefault(e.task_id, set()).add(e.ref)
        return PacketValidator(packet.packet_id, cells, ws.read_lines, in_manifest, leads, earlier)
    # Loaded for a second opinion only: a review packet's submission does without their answer models.
    from audit_mcp.engine.opinion_validation import ContextValidator, VerifyValidator

    if packet.kind == CellKind.CONTEXT:

        def known_path(path: str) -> bool:
            with ws.store.read() as tx:
                return tx.has_path(audit_id, path)

        return ContextValidator(packet.packet_id, cells, known_path)
    with ws.store.read() as tx:
        shown = claimed(current_synthesis(tx, audit_id), cells)
    return VerifyValidator(packet.packet_id, cells, shown, ws.read_lines, in_manifest)


def _dry_run(
    run_id: str,
    packet_id: str,
    replaces: bool,
    duplicate: bool,
    warnings: list[Problem],
    results: list[dict[str, Any]],
) -> Receipt:
    """The receipt a submission of these valid results would get, with nothing recorded."""
    if replaces:
        warnings = [
            *warnings,
            Problem(location="/", message="this submission replaced the packet's earlier accepted one"),
        ]
    covered = sum(1 for r in results if r["status"] != "could_not_review")
    return Receipt(
        accepted=True,
        run_id=run_id,
        packet_id=packet_id,
        duplicate=duplicate,
        dry_run=True,
        warnings=warnings,
        tasks_covered=covered,
        tasks_open=len(results) - covered,
        findings_kept=sum(len(r.get("findings", [])) for r in results),
        next_action="Valid: submit_packet would accept these results as they are. Nothing was recorded; submit "
        "them (submit_packet, or audit-mcp submit-packet) to record them.",
    )


def _unknown_run(ws: Workspace, run_id: str, what: str) -> str:
    return (
        f"run {run_id!r} is unknown in {ws.artifacts_dir} ({what}); take run_id from the dispatch plan or the "
        "packet prompt you were given, and submit to the --root (or --artifacts-dir) that prompt names"
    )
