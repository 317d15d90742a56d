"""Deferred results: a results file written at a packet's documented path counts, even if never submitted.

A reviewer that can write files but not run a command, a worker that ran out of turns after writing its
answer, or a worker killed right after it: each leaves ``runs/<run_id>/results/<packet_id>.<token>.json``
under the artifacts directory, the name its prompt gave it (the token is sealed with the user's key, so no
one who was not given the prompt can name the file; any other file there is never read, and the merge
names it). Before a run is merged (and whenever ``next_step`` looks at a run in flight), every
such file of a packet without an accepted submission is checked and recorded exactly as ``submit_packet``
would: a valid one becomes the packet's submission (the ledger says "ingested from file"). At merge time
an invalid one is reported with its errors, and the packet is handed out again with them in its prompt;
before that it is left alone, since its writer may still be at work.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from audit_mcp.core.errors import PathError
from audit_mcp.core.fs import read_regular
from audit_mcp.core.models import Problem, Receipt
from audit_mcp.engine.checks import MAX_PAYLOAD_CHARS
from audit_mcp.engine.ingest import INVALID_RESULTS
from audit_mcp.usecases.submission import submit_packet
from audit_mcp.usecases.workspace import Workspace

MAX_ERRORS_QUOTED = 12


@dataclass
class DeferredIngest:
    """What one pass over a run's results files did."""

    ingested: list[str] = field(default_factory=list)  # packet ids recorded from their files
    refused: dict[str, str] = field(default_factory=dict)  # packet id -> what is wrong with its file
    unissued: list[str] = field(default_factory=list)  # files in the results folder no packet was told to write


__all__ = ["INVALID_RESULTS", "DeferredIngest", "ingest_deferred", "ingest_file", "read_results_file", "unissued_files"]


def read_results_file(path: Path) -> tuple[bytes | None, str | None]:
    """The bytes of a results file, or why it cannot be used (a link, a FIFO or an oversize file is refused,
    never followed or waited on); ``submit_packet`` decodes them."""
    try:
        return read_regular(path, MAX_PAYLOAD_CHARS * 4), None
    except PathError as exc:
        return None, f"{exc}; write the results as a regular JSON file in UTF-8"


def refusal_text(receipt: Receipt) -> str:
    """A refused receipt's errors in one line each: what the next attempt's prompt quotes."""
    lines = [f"{e.location}: {e.message}" for e in receipt.errors[:MAX_ERRORS_QUOTED]]
    if len(receipt.errors) > MAX_ERRORS_QUOTED:
        lines.append(f"... and {len(receipt.errors) - MAX_ERRORS_QUOTED} more")
    return "; ".join(lines)


def ingest_file(ws: Workspace, run_id: str, packet_id: str, path: Path, *, dry_run: bool = False) -> Receipt:
    """Check one results file for one packet, and record it unless ``dry_run``: the receipt either way."""
    text, problem = read_results_file(path)
    if problem is not None:
        return Receipt(
            accepted=False,
            run_id=run_id,
            packet_id=packet_id,
            dry_run=dry_run,
            errors=[Problem(location="/results", message=problem)],
            next_action="Nothing was recorded. Fix the file and hand it in again.",
        )
    origin = _shown(ws, path)
    receipt = submit_packet(ws, run_id, packet_id, text, origin=origin, dry_run=dry_run)
    return receipt.model_copy(update={"dry_run": True}) if dry_run else receipt


def ingest_deferred(ws: Workspace, run_id: str, *, final: bool) -> DeferredIngest:
    """Record the results files of the run's packets that have no accepted submission.

    ``final`` (at merge): a file that is refused, or unreadable, is reported in ``refused`` and logged.
    Otherwise such a file is left for later: its writer may not have finished it.
    """
    out = DeferredIngest()
    with ws.store.read() as tx:
        run = tx.run(run_id, plan=False)
        if run is None or run.state != "open":
            return out
        submitted = tx.submitted_packet_ids(run_id)
        packet_ids = [p.packet_id for p in tx.packets(run_id)]
        waiting = [p for p in packet_ids if p not in submitted]
    if final:
        out.unissued = unissued_files(ws, run_id, packet_ids)
    for packet_id in waiting:
        path = ws.results_path(run_id, packet_id)
        if not (path.exists() or path.is_symlink()):
            continue
        receipt = ingest_file(ws, run_id, packet_id, path)
        if receipt.accepted:
            out.ingested.append(packet_id)
        elif final:
            out.refused[packet_id] = f"the results file {_shown(ws, path)} was refused: {refusal_text(receipt)}"
    if out.refused or out.unissued:
        with ws.store.write() as tx:
            for packet_id, text in out.refused.items():
                tx.log(
                    now=ws.now(),
                    audit_id=run.audit_id,
                    actor="engine",
                    action="ingest_results_file",
                    detail=f"{packet_id}: {text[:600]}",
                    outcome="refused",
                )
            if out.unissued:
                tx.log(
                    now=ws.now(),
                    audit_id=run.audit_id,
                    actor="engine",
                    action="ingest_results_file",
                    detail=f"not read, no packet of this run was told to write them: {', '.join(out.unissued)[:600]}",
                    outcome="refused",
                )
    return out


MAX_UNISSUED_LISTED = 50


def unissued_files(ws: Workspace, run_id: str, packet_ids: list[str]) -> list[str]:
    """The files in the run's results folder that are not the results file of one of its packets (each
    packet's name carries a sealed token, so a planted file cannot match): never read, only named."""
    folder = ws.results_dir(run_id)
    try:
        with os.scandir(folder) as entries:
            names = sorted(entry.name for entry in entries if not entry.name.startswith("."))
    except OSError:
        return []
    issued = {ws.results_path(run_id, p).name for p in packet_ids}
    strays = [name for name in names if name not in issued]
    shown = [_shown(ws, folder / name) for name in strays[:MAX_UNISSUED_LISTED]]
    return shown + ([f"... and {len(strays) - MAX_UNISSUED_LISTED} more"] if len(strays) > MAX_UNISSUED_LISTED else [])


def _shown(ws: Workspace, path: Path) -> str:
    """A results file's path as people read it: relative to the artifacts directory when inside it."""
    try:
        return path.absolute().relative_to(ws.artifacts_dir).as_posix()
    except ValueError:
        return str(path)
