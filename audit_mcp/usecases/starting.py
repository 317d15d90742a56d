"""Starting an audit: intake (the manifest and analyzer leads) and planning (the coverage matrix)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from audit_mcp.core.config import SessionConfig, config_label
from audit_mcp.core.errors import ConfigError, PathError
from audit_mcp.core.fs import read_capped, read_confined
from audit_mcp.engine import hosts
from audit_mcp.engine.coverage import build_matrix
from audit_mcp.engine.git import GitReader
from audit_mcp.engine.incremental import carry_forward, changed_since, copy_findings
from audit_mcp.engine.intake import build_manifest
from audit_mcp.findings.analyzers import run_analyzers
from audit_mcp.findings.leads import MAX_SARIF_BYTES, import_leads
from audit_mcp.store.records import AuditRow, CellKind, CellState, FileRow
from audit_mcp.store.tx import Tx
from audit_mcp.usecases import code_facts, history, snapshot, verifying
from audit_mcp.usecases.context import context_cell
from audit_mcp.usecases.workspace import Workspace


def intake(
    ws: Workspace, config: SessionConfig, lenses: list[str], arguments: Mapping[str, Any], *, replaces: int | None
) -> None:
    """Read the repository into a new audit: its manifest, code map and analyzer leads.

    Single-flight: the audit is created in the write transaction only if the current audit is still
    ``replaces`` (the one the caller saw, ``None`` for none); when another caller started one meanwhile,
    this call joins it and creates nothing.
    """
    cache = code_facts.read(ws, config)
    manifest = build_manifest(ws.root, ws.artifacts_dir, config, config_label(ws.root, ws.config_path), cache)
    packed = cache.packed(config) if cache is not None else None  # before the write: it takes a while
    in_scope = {f.path for f in manifest.in_scope}
    ran = run_analyzers(config.analyzers.run, ws.root, ws.artifacts_dir / "analyzers", sorted(in_scope))
    sources = [_read_sarif(ws, "sarif", i, p) for i, p in enumerate(config.analyzers.sarif)]
    sources += [_read_sarif(ws, "results", i, p) for i, p in enumerate(config.analyzers.results)]
    sources += [(str(r.sarif), read_capped(r.sarif, MAX_SARIF_BYTES)) for r in ran if r.sarif is not None]
    imported = import_leads(sources, ws.root, in_scope.__contains__)
    now = ws.now()
    with ws.store.write() as tx:
        previous = tx.current_audit()
        if (previous.audit_id if previous else None) != replaces:
            assert previous is not None
            tx.log(
                now=now,
                audit_id=previous.audit_id,
                actor="engine",
                action="intake",
                detail=f"another caller started audit {previous.audit_id} at the same time; joined it",
                outcome="joined",
            )
            return
        audit_id = tx.create_audit(
            now=now,
            root=str(ws.root),
            git_head=manifest.git_head,
            git_dirty=manifest.git_dirty,
            digest=manifest.digest,
            lenses=lenses,
        )
        # Host answers carry over to a new audit; what an audit was started with (lenses, since, analyzer
        # output) belongs to that audit.
        carried = {k: v for k, v in (previous.host_caps if previous else {}).items() if k not in hosts.STARTED_WITH}
        tx.set_host_caps(audit_id, hosts.remember(arguments, carried))
        tx.insert_files(audit_id, manifest.files)
        code_map = manifest.code_map
        tx.insert_map(audit_id, (e.stored() for e in code_map.edges), code_map.entries)
        cached = code_facts.record(tx, cache, packed)
        tx.insert_leads(audit_id, imported.leads)
        tx.log(
            now=now,
            audit_id=audit_id,
            actor="engine",
            action="intake",
            detail=f"{len(manifest.in_scope)} file(s) in scope, {len(manifest.files) - len(manifest.in_scope)} "
            f"skipped, listed by {manifest.source}; code map of {code_map.files} file(s): {len(code_map.edges)} "
            f"edge(s) between files, {sum(len(e.links) for e in code_map.edges)} link(s), "
            f"{len(code_map.entries)} entry point(s)"
            + cached
            + (f", read by {manifest.processes} processes" if manifest.processes > 1 else "")
            + "".join(f"; {note}" for note in manifest.redone)
            + (f"; {len(imported.leads)} analyzer lead(s) imported" if sources else "")
            + "".join(f"; {r.note}" for r in ran)
            + "".join(f", {n} dropped ({why})" for why, n in sorted(imported.dropped.items())),
            outcome="ok",
        )
    ws.hand_over(audit_id, manifest.files)
    snapshot.taken(ws, audit_id)


def _read_sarif(ws: Workspace, key: str, index: int, path: str) -> tuple[str, bytes]:
    """An analyzer output file: one the user named (an absolute path) as given, one the repository's config
    (or a host's ``analyzer_results``) names relative to the root only as a regular file inside it."""
    try:
        if Path(path).is_absolute():
            return path, read_capped(Path(path), MAX_SARIF_BYTES)
        return path, read_confined(ws.root, path, MAX_SARIF_BYTES)
    except PathError as exc:
        named = (
            "given with --analyzer-results or in your config"
            if Path(path).is_absolute()
            else f"named by analyzers.{key}[{index}] or analyzer_results (relative to the repository root)"
        )
        kind = "SARIF" if key == "sarif" else "results"
        raise ConfigError(
            f"cannot read analyzer {kind} {path}, {named}: {exc}. Fix the path or drop it, then call next_step again."
        ) from exc


def plan(ws: Workspace, config: SessionConfig) -> None:
    """The coverage matrix of the new audit, with what an earlier audit already covered carried forward."""
    now = ws.now()
    with ws.store.write() as tx:
        audit = ws.require_audit(tx)
        if tx.cell_counts(audit.audit_id):
            return  # another caller planned this audit while this one decided to: nothing left to do
        files = ws.take_manifest(audit.audit_id) or tx.files(audit.audit_id)
        count = tx.insert_matrix(audit.audit_id, build_matrix(files, config), now)
        carried = carry_forward(tx, audit.audit_id, now, enabled=config.carry_forward)
        kept = copy_findings(tx, audit.audit_id, carried)
        earlier = sorted((a for a in tx.audit_ids() if a < audit.audit_id), reverse=True) if carried.tasks else []
        opinions = verifying.carry_forward(tx, audit.audit_id, earlier, now)
        unreviewed = _since_scope(ws, tx, audit, config, files, now)
        shown = history.remember_earlier(tx, audit.audit_id)
        context = context_cell(tx, audit.audit_id, files, config, now)
        tx.log(
            now=now,
            audit_id=audit.audit_id,
            actor="engine",
            action="plan",
            detail=f"{count} cell(s) over lenses {', '.join(audit.lenses)}"
            + (f"; {carried.summary()}, with {kept} finding(s) and {opinions} verification(s)" if carried.tasks else "")
            + unreviewed
            + (f"; {shown} earlier finding(s) shown to the re-reviews of their lines" if shown else "")
            + f"; threat model: {context}",
            outcome="ok",
        )


def _since_scope(ws: Workspace, tx: Tx, audit: AuditRow, config: SessionConfig, files: list[FileRow], now: str) -> str:
    """With ``since``, only what changed after the ref is reviewed: every other cell not carried from an
    earlier review is skipped, saying so (the audit is then partial, and the report names each one).
    Returns what the ledger says about it."""
    ref = audit.host_caps.get("since") or config.since
    if not ref:
        return ""
    git = GitReader(ws.root)
    changed = changed_since(git if git.work_tree() is not None else None, ws.root, str(ref))
    unchanged = {f.path for f in files if f.path not in changed}
    reason = (
        f"unchanged since {ref} and never reviewed by an earlier audit; an audit without since "
        "(`audit-mcp next-step --new-audit`) reviews it"
    )
    skipped = [
        c.task_id for c in tx.cells(audit.audit_id, [CellState.PENDING], kinds=[CellKind.REVIEW]) if c.path in unchanged
    ]
    tx.carry_cells(audit.audit_id, [(task, CellState.SKIPPED.value, None, None, reason) for task in skipped], now)
    changed_here = sum(1 for f in files if f.path in changed and f.scope == "review")
    return f"; since {ref}: {changed_here} file(s) changed, {len(skipped)} unchanged cell(s) never reviewed skipped"
