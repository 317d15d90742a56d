"""cleanup: remove what finished runs left on disk, and temporary files a crash left behind.

Removed: the packet prompts, dispatch plan and results files of every finished (merged or abandoned) run
but the ``keep_runs`` most recent, their worker logs too with ``logs``, run folders no run of the
database knows (a crash before a dispatch committed), and orphan temporary files of atomic writes.
Anything younger than ``MIN_AGE_SECONDS`` is left (a run that finished since, too), so a dispatch, a write
or a host still reading a plan is never touched.
Never removed: the database (which holds the ledger and every accepted submission), the report, the
current step, analyzer output, and anything of the run in flight.
"""

from __future__ import annotations

import shutil
import time
from datetime import datetime
from pathlib import Path

from audit_mcp.core.operations import CleanupResult
from audit_mcp.store.records import RunRow
from audit_mcp.store.sqlite import DB_FILENAME
from audit_mcp.usecases.workspace import Workspace

MIN_AGE_SECONDS = 600.0
_RUN_FILES = ("packets", "dispatch-plan.json", "results")
NEVER = (DB_FILENAME, f"{DB_FILENAME}-wal", f"{DB_FILENAME}-shm", "report/", "steps/", "analyzers/", ".gitignore")


def cleanup(ws: Workspace, *, keep_runs: int = 0, logs: bool = False, dry_run: bool = False) -> CleanupResult:
    with ws.store.read() as tx:
        runs = [r for a in tx.audit_ids() for r in tx.runs(a, plan=False)]
    known = {r.run_id for r in runs}
    finished = sorted((r for r in runs if r.state != "open"), key=lambda r: r.merged_at or r.created_at)
    kept = [r.run_id for r in finished[len(finished) - keep_runs :]] if keep_runs > 0 else []
    now = time.time()
    # The age rule holds for finished runs too: one that finished less than MIN_AGE_SECONDS ago keeps its
    # files (a host may still be reading its plan or a late worker writing), whatever --keep-runs says.
    recent = [r.run_id for r in finished if r.run_id not in kept and not _finished_before(r, now)]
    targets: list[Path] = []
    for run in finished:
        if run.run_id in kept or run.run_id in recent:
            continue
        folder = ws.run_dir(run.run_id)
        targets += [folder / name for name in _RUN_FILES]
        if logs:
            targets.append(folder / "workers")
    runs_dir = ws.artifacts_dir / "runs"
    if runs_dir.is_dir():
        targets += [p for p in runs_dir.iterdir() if p.name not in known and _older(p, now)]
    targets += [p for p in ws.artifacts_dir.rglob(".*.tmp") if p.is_file() and _older(p, now)]
    removed, freed = [], 0
    for path in targets:
        if not (path.exists() or path.is_symlink()):
            continue
        freed += _size(path)
        removed.append(path.relative_to(ws.artifacts_dir).as_posix() + ("/" if path.is_dir() else ""))
        if not dry_run:
            _remove(path)
    if not dry_run:
        for run in finished:  # a finished run's folder with nothing left in it goes too
            folder = ws.run_dir(run.run_id)
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        with ws.store.write() as tx:
            audit = tx.current_audit()
            tx.log(
                now=ws.now(),
                audit_id=audit.audit_id if audit else None,
                actor="person",
                action="cleanup",
                detail=f"{len(removed)} path(s) removed, {freed} bytes freed"
                + (f"; kept the files of {', '.join(kept)}" if kept else ""),
                outcome="ok",
            )
    return CleanupResult(
        dry_run=dry_run,
        removed=removed,
        bytes_freed=freed,
        kept_runs=kept,
        too_recent=recent,
        never_removed=list(NEVER),
        next_action=(
            "Nothing was removed (dry run); run it again without --dry-run to remove these."
            if dry_run
            else "Done. The audit's state, ledger and report are untouched."
        )
        + (
            f" {len(recent)} run(s) finished less than {MIN_AGE_SECONDS / 60:g} minutes ago and keep their files; "
            "run cleanup again later for them."
            if recent
            else ""
        ),
    )


def _finished_before(run: RunRow, now: float) -> bool:
    """Whether ``run`` finished at least ``MIN_AGE_SECONDS`` before ``now`` (by its record, else its files)."""
    moment = run.merged_at or run.created_at
    try:
        finished = datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return False
    return now - finished >= MIN_AGE_SECONDS


def _older(path: Path, now: float) -> bool:
    try:
        return now - path.lstat().st_mtime >= MIN_AGE_SECONDS
    except OSError:
        return False


def _size(path: Path) -> int:
    if path.is_symlink() or path.is_file():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
