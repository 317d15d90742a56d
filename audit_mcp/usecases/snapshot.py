"""Whether this host's checkout is the audit's snapshot: in a shared store, hosts review their own files.

Evidence is validated against the checkout of the host that submits it, so a host whose checkout differs
from the audit's (another commit, or files changed, added or removed) would accept findings against code
the audit never read. Such a host is refused work, with the difference named, until its checkout matches.
The check reads the checkout once per audit and host process; the host whose intake made the snapshot has
just read it, and does not read it again.
"""

from __future__ import annotations

from audit_mcp.core.config import config_label
from audit_mcp.engine.intake import build_manifest
from audit_mcp.store.records import AuditRow, FileRow
from audit_mcp.usecases import code_facts
from audit_mcp.usecases.workspace import Workspace

MAX_NAMED = 10
_CHECKED: dict[tuple[str, int], str | None] = {}


def difference(ws: Workspace, audit: AuditRow) -> str | None:
    """Why this checkout is not the audit's snapshot, or ``None`` when it is."""
    key = (str(ws.root), audit.audit_id)
    if key not in _CHECKED:
        _CHECKED[key] = _compare(ws, audit)
    return _CHECKED[key]


def taken(ws: Workspace, audit_id: int) -> None:
    """This process's intake read the checkout into audit ``audit_id`` (the audit's snapshot is this checkout
    as it read it): the check that would read it again now has its answer."""
    _CHECKED[(str(ws.root), audit_id)] = None


def _compare(ws: Workspace, audit: AuditRow) -> str | None:
    config = ws.config()
    label = config_label(ws.root, ws.config_path)
    manifest = build_manifest(ws.root, ws.artifacts_dir, config, label, code_facts.read(ws, config, looking=True))
    if manifest.digest == audit.manifest_digest:
        return None
    parts = []
    if audit.git_head and manifest.git_head != audit.git_head:
        parts.append(f"it is at commit {manifest.git_head or 'none'}, the audit's snapshot at {audit.git_head}")
    with ws.store.read() as tx:
        theirs = {f.path: f for f in tx.files(audit.audit_id)}
    parts.append(_files(theirs, {f.path: f for f in manifest.files}))
    return (
        f"this checkout ({ws.root}) differs from the snapshot of audit {audit.audit_id} that other hosts review: "
        + "; ".join(p for p in parts if p)
        + f". Bring it to the snapshot ({f'git checkout {audit.git_head}, ' if audit.git_head else ''}without "
        "local changes), then call next_step again; nothing was claimed."
    )


def _files(theirs: dict[str, FileRow], mine: dict[str, FileRow]) -> str:
    changed = sorted(p for p in theirs.keys() & mine.keys() if theirs[p].sha256 != mine[p].sha256)
    added = sorted(mine.keys() - theirs.keys())
    removed = sorted(theirs.keys() - mine.keys())
    named = [
        f"{label} {len(paths)} file(s) ({', '.join(paths[:MAX_NAMED])}{', ...' if len(paths) > MAX_NAMED else ''})"
        for label, paths in (("changed", changed), ("added", added), ("missing", removed))
        if paths
    ]
    return ", ".join(named) if named else "its manifest digest differs (the files' scope or kinds)"
