"""Incremental audits: a new audit keeps the coverage of every cell whose content is unchanged since its
latest review in any earlier audit (by content hash), with its findings, and ``since`` names what changed
after a git ref.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from audit_mcp.core.errors import ConfigError
from audit_mcp.engine.git import GitReader, paths_of
from audit_mcp.store.records import DONE_STATES, CellKind, CellState
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


CARRIED_FROM = re.compile(r"^carried forward from audit (\d+)")


def carried_from(reason: str | None) -> int | None:
    """The audit a carried cell's review was made in, from its reason."""
    match = CARRIED_FROM.match(reason or "")
    return int(match.group(1)) if match else None


@dataclass
class Carried:
    """What a new audit took over from the repository's history: new task id -> (the audit that reviewed it,
    that audit's task id), and how many cells each audit gave."""

    tasks: dict[str, tuple[int, str]] = field(default_factory=dict)
    by_audit: dict[int, int] = field(default_factory=dict)

    def summary(self) -> str:
        parts = ", ".join(f"{n} from audit {a}" for a, n in sorted(self.by_audit.items()))
        return f"{len(self.tasks)} cell(s) carried forward ({parts}), their content unchanged" if self.tasks else ""


def carry_forward(tx: Tx, audit_id: int, now: str, *, enabled: bool = True) -> Carried:
    """Mark the new audit's review cells that an earlier audit reviewed, unchanged, as carried.

    The repository's history is every earlier audit, newest first: a cell carries over from the latest one
    that reviewed the same file range under the same lens with the same content hash (a cell that audit
    carried itself names the audit that reviewed it). Its findings come along (``copy_findings``).
    """
    out = Carried()
    if not enabled:
        return out
    review = [CellKind.REVIEW.value]
    wanted = {(c.path, c.start_line, c.end_line, c.lens, c.content_hash): c for c in tx.cells(audit_id, kinds=review)}
    updates: list[tuple[str, str, str | None, str | None, str]] = []
    for earlier in sorted((a for a in tx.audit_ids() if a < audit_id), reverse=True):
        if not wanted:
            break
        head = tx.audit(earlier)
        commit = f" at commit {head.git_head[:12]}" if head is not None and head.git_head else ""
        for old in tx.cells(earlier, DONE_STATES, kinds=review):
            cell = wanted.pop((old.path, old.start_line, old.end_line, old.lens, old.content_hash), None)
            if cell is None:
                continue
            source = carried_from(old.reason) if old.state == CellState.CARRIED else None
            if source is None:
                source, reason = earlier, f"carried forward from audit {earlier}{commit}: content unchanged"
                if old.state == CellState.NOT_APPLICABLE:
                    reason += f" (not applicable there: {old.reason or 'no reason given'})"
            else:
                reason = old.reason or f"carried forward from audit {source}"
            out.tasks[cell.task_id] = (earlier, old.task_id)
            out.by_audit[source] = out.by_audit.get(source, 0) + 1
            updates.append((cell.task_id, CellState.CARRIED.value, old.run_id, old.packet_id, reason))
    tx.carry_cells(audit_id, updates, now)
    return out


def copy_findings(tx: Tx, audit_id: int, carried: Carried) -> int:
    """Bring the findings of carried cells into the new audit, each marked with the audit (and commit) it was
    made in, first (a finding carried again keeps its first origin); returns how many."""
    by_audit: dict[int, dict[str, str]] = {}
    for new, (earlier, old) in carried.tasks.items():
        by_audit.setdefault(earlier, {})[old] = new
    copied = 0
    for earlier, tasks in sorted(by_audit.items()):
        row = tx.audit(earlier)
        origin = {"audit_id": earlier, "git_head": row.git_head if row is not None else None}
        for finding in tx.findings(earlier):
            new_task = tasks.get(finding["task_id"])
            if new_task is None:
                continue
            payload = {k: v for k, v in finding.items() if k not in _FINDING_META}
            payload.setdefault("carried_from", origin)
            tx.insert_finding(audit_id, finding["run_id"], finding["packet_id"], new_task, finding["lens"], payload)
            copied += 1
    return copied
