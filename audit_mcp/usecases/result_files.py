"""Results produced elsewhere: ingesting (or only checking) results files named by their packet id.

``audit-mcp ingest-results`` and ``validate-results`` take one file (``--results FILE``) or a folder of
them (``--batch-results-dir DIR``: every ``*.json`` in it, in name order). A file is named after its
packet (``A1-R2-P03.json``), the name ``submit_packet`` would be given, unless the caller names the packet
itself; the run is the packet's own. Each file goes through exactly the checks of ``submit_packet`` and is
as idempotent: the same file twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from audit_mcp.core.errors import ConfigError
from audit_mcp.core.models import FileReceipt, Problem, Receipt
from audit_mcp.core.text import clean_text, id_problem
from audit_mcp.usecases.deferred import ingest_file
from audit_mcp.usecases.workspace import Workspace

MAX_BATCH_FILES = 5_000


def batch_files(folder: Path) -> list[Path]:
    """The results files of a batch folder, in name order."""
    if not folder.is_dir():
        raise ConfigError(f"--batch-results-dir {folder} is not a folder; pass the folder that holds the files")
    files = sorted(p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith("."))
    if not files:
        raise ConfigError(f"no results files (*.json, named by packet id) in {folder}")
    if len(files) > MAX_BATCH_FILES:
        raise ConfigError(f"{folder} holds {len(files)} results files; at most {MAX_BATCH_FILES} go in one batch")
    return files


def ingest_results(
    ws: Workspace,
    files: Sequence[Path],
    *,
    run_id: str | None = None,
    packet_id: str | None = None,
    dry_run: bool = False,
) -> list[FileReceipt]:
    """One receipt per file, in order: recorded as submissions, or (``dry_run``) only checked."""
    if packet_id is not None and len(files) != 1:
        raise ConfigError("a packet id names the packet of one results file; use --results FILE with it")
    out = []
    for path in files:
        packet = packet_id or path.stem
        run, problem = _run_of(ws, packet, run_id, named_by_file=packet_id is None)
        if problem is not None:
            receipt = Receipt(
                accepted=False,
                run_id=clean_text(run or ""),
                packet_id=clean_text(packet),
                dry_run=dry_run,
                errors=[Problem(location="/packet_id", message=problem)],
                next_action="Nothing was recorded. Name the file after its packet, or pass its packet id.",
            )
        else:
            assert run is not None
            receipt = ingest_file(ws, run, packet, path, dry_run=dry_run)
        out.append(FileReceipt(file=str(path), packet_id=receipt.packet_id, receipt=receipt))
    return out


def _run_of(ws: Workspace, packet_id: str, run_id: str | None, *, named_by_file: bool) -> tuple[str | None, str | None]:
    """The run a packet belongs to (or the one given), or why the packet cannot be found."""
    if problem := id_problem("packet_id", packet_id):
        return run_id, problem
    with ws.store.read() as tx:
        packet = tx.packet(packet_id)
    if packet is None:
        source = f"the file name says packet {packet_id!r}" if named_by_file else f"packet {packet_id!r}"
        return run_id, (
            f"{source}, which no run of this audit has; results files are named by packet id "
            "(e.g. A1-R1-P01.json), as the dispatch plan lists them"
        )
    return run_id or packet.run_id, None
