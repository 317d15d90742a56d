"""Incremental audits: ``since`` narrows the scope to what changed after a git ref, and a new audit keeps
the coverage of every cell whose file content is unchanged (by content hash), with its findings.
"""

from __future__ import annotations

from pathlib import Path

from audit_mcp.core.errors import ConfigError
from audit_mcp.engine.git import GitReader, paths_of
from audit_mcp.store.records import DONE_STATES, CellKind
from audit_mcp.store.tx import Tx

_FINDING_META = ("finding_id", "run_id", "packet_id", "task_id", "lens")


def changed_since(git: GitReader | None, root: Path, ref: str) -> set[str]:
    """Repo-relative paths that differ between ``ref`` and the working tree, plus untracked files.

    ``git`` is ``None`` when the root is not a git work tree (``since`` then cannot be honoured).
    """
    if git is None:
        raise ConfigError(
            f'`since = "{ref}"` needs a git repository, and {root} is not one; drop `since` '
            "from the session config to audit every file"
        )
    if ref.startswith("-") or not ref.isprintable():
        raise ConfigError(f"`since` must name a git ref such as main or a commit id, not {ref!r}")
    commit = git.run("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if commit is None or commit.returncode != 0:
        raise ConfigError(
            f'`since = "{ref}"` is not a commit in {root}; give a branch, tag or commit id that `git rev-parse` knows'
        )
    sha = commit.stdout.decode().strip()
    what = f"list the changes since {ref} with git"
    diff = git.require(
        what,
        "diff",
        "--name-only",
        "-z",
        "--no-renames",
        "--no-ext-diff",
        "--no-textconv",
        "--ignore-submodules=all",
        sha,
        "--",
    )
    others = git.require(what, "ls-files", "-z", "--others", "--exclude-standard")
    return set(paths_of(diff)) | set(paths_of(others))


def carry_forward(tx: Tx, audit_id: int, now: str, *, enabled: bool = True) -> tuple[dict[str, str], int | None]:
    """Mark the new audit's cells that an earlier audit already covered, unchanged, as covered.

    A cell carries over when the previous audit covered the same file range under the same lens and the
    file's content hash is the same. Returns a map new task id → previous task id for the carried cells
    (their findings come along) and the previous audit's id.
    """
    previous = tx.previous_audit_id(audit_id)
    if previous is None or not enabled:
        return {}, None
    review = [CellKind.REVIEW.value]
    done = {
        (c.path, c.start_line, c.end_line, c.lens, c.content_hash): c
        for c in tx.cells(previous, DONE_STATES, kinds=review)
    }
    if not done:
        return {}, previous
    carried: dict[str, str] = {}
    updates: list[tuple[str, str, str | None, str | None, str]] = []
    reason = f"carried forward from audit {previous}: content unchanged"
    for cell in tx.cells(audit_id, kinds=review):
        old = done.get((cell.path, cell.start_line, cell.end_line, cell.lens, cell.content_hash))
        if old is not None:
            carried[cell.task_id] = old.task_id
            updates.append((cell.task_id, old.state, old.run_id, old.packet_id, reason))
    tx.carry_cells(audit_id, updates, now)
    return carried, previous


def copy_findings(tx: Tx, audit_id: int, previous: int, carried: dict[str, str]) -> int:
    """Bring the findings of carried cells into the new audit; returns how many."""
    if not carried:
        return 0
    by_old = {old: new for new, old in carried.items()}
    copied = 0
    for finding in tx.findings(previous):
        new_task = by_old.get(finding["task_id"])
        if new_task is None:
            continue
        payload = {k: v for k, v in finding.items() if k not in _FINDING_META}
        tx.insert_finding(audit_id, finding["run_id"], finding["packet_id"], new_task, finding["lens"], payload)
        copied += 1
    return copied
