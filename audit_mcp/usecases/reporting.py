"""The report: built from the audit's state, written when the audit is synthesized, provisional before."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.errors import ConfigError, NotFoundError, PathError
from audit_mcp.core.fs import resolve_inside, write_atomic
from audit_mcp.engine import drift
from audit_mcp.engine.coverage import completeness, totals
from audit_mcp.findings.assessment import assess
from audit_mcp.findings.comparison import compare
from audit_mcp.findings.leads import lead_report
from audit_mcp.findings.page_data import CellStates
from audit_mcp.findings.report import ReportInput, render_json, render_markdown
from audit_mcp.findings.report_opinions import Opinions
from audit_mcp.findings.sarif import render_sarif
from audit_mcp.findings.synthesis import Finding
from audit_mcp.findings.synthesis import synthesize as synthesize_findings
from audit_mcp.store.records import AuditRow, CellKind, CellState, FileRow
from audit_mcp.store.tx import Tx
from audit_mcp.usecases import page
from audit_mcp.usecases.audit_forecast import FORECAST_ACTION
from audit_mcp.usecases.forecast_sums import UNKNOWN_MODEL
from audit_mcp.usecases.report_scope import carried_counts, empty_reason, scope_reason
from audit_mcp.usecases.usage import used
from audit_mcp.usecases.verifying import judged_same
from audit_mcp.usecases.workspace import Workspace

SCRIPTED_REVIEWER = "scripted_reviewer"  # the ledger action that marks an audit's reviews as scripted


def declare_scripted_reviewer(ws: Workspace, label: str) -> None:
    """Record that a program, not a model, answers this audit's packets: every report then says so."""
    with ws.store.write() as tx:
        audit = ws.require_audit(tx)
        tx.log(
            now=ws.now(), audit_id=audit.audit_id, actor="host", action=SCRIPTED_REVIEWER, detail=label, outcome="ok"
        )


def build_report_input(ws: Workspace, *, final: bool = False, audit_id: int | None = None) -> ReportInput:
    """Everything a rendering of the report needs, read in one snapshot; provisional unless ``final`` (the
    report synthesis writes) or the audit is already synthesized. ``audit_id``: an earlier audit's (default:
    the current one)."""
    return report_and_cells(ws, final=final, audit_id=audit_id)[0]


def report_and_cells(
    ws: Workspace, *, final: bool = False, audit_id: int | None = None, sources: bool = True
) -> tuple[ReportInput, list[CellStates]]:
    """``build_report_input``, and every review cell's place, lens and state, read in the same snapshot (the
    page maps them); ``sources``: False leaves out the files' bytes, which only SARIF reads."""
    ws.require_state()
    config = ws.config()
    with ws.store.read() as tx:
        audit = ws.require_audit(tx) if audit_id is None else _audit_numbered(ws, tx, audit_id)
        scripted = tx.ledger_details(audit.audit_id, SCRIPTED_REVIEWER)
        counts = tx.cell_counts(audit.audit_id)
        states = tx.review_cell_states(audit.audit_id)
        others = tx.cells(audit.audit_id, kinds=[CellKind.CONTEXT, CellKind.VERIFY])
        gap_cells = tx.cells(audit.audit_id, [CellState.FAILED, CellState.SKIPPED])
        carried = tx.cells(audit.audit_id, [CellState.CARRIED])
        files = tx.files(audit.audit_id)
        raw = tx.findings(audit.audit_id)
        runs = tx.runs(audit.audit_id, plan=False)
        by_lens = tx.cell_counts_by_lens(audit.audit_id)
        baseline = tx.previous_audit(audit.audit_id)
        leads, verdicts = tx.leads(audit.audit_id), tx.verdicts(audit.audit_id)
        baseline_raw = tx.findings(baseline.audit_id) if baseline else []
        opinions, evidence = tx.finding_verdicts(audit.audit_id), tx.runtime_evidence(audit.audit_id)
        threat = tx.threat_model(audit.audit_id)
        by_kind = tx.cell_counts_by_kind(audit.audit_id)
        baseline_opinions = tx.finding_verdicts(baseline.audit_id) if baseline else []
        resolutions = tx.resolutions(audit.audit_id)
        spent = used(tx, audit.audit_id, config, _model(tx, audit.audit_id, audit.host_caps))
    merged = synthesize_findings(raw, same=judged_same(opinions))
    comparison = None
    if baseline is not None:
        before = synthesize_findings(baseline_raw, same=judged_same(baseline_opinions))
        comparison = compare(merged, before, baseline.audit_id, resolutions, {f.path for f in files})
    synthesis = assess(merged, opinions, evidence)
    context = next((c for c in others if c.kind == CellKind.CONTEXT), None)
    report = ReportInput(
        repo_name=ws.root.name,
        root=str(ws.root),
        audit_id=audit.audit_id,
        created_at=audit.created_at,
        generated_at=ws.now(),
        git_head=audit.git_head,
        git_dirty=audit.git_dirty,
        manifest_digest=audit.manifest_digest,
        completeness=completeness(counts),
        completeness_reason=empty_reason(files) if not counts else scope_reason(files),
        provisional=not final and audit.synthesized_at is None,
        blocker=audit.blocker,
        abandoned=f"at {audit.abandoned_at}: {audit.abandon_reason}" if audit.abandoned_at else None,
        carried=carried_counts(carried),
        scripted_reviewers=scripted,
        lenses=audit.lenses,
        coverage_by_lens=by_lens,
        totals=totals(counts),
        gap_cells=gap_cells,
        skipped_files=[f for f in files if f.scope == "skipped"],
        changed_since_snapshot=_changed(ws, config, files),
        runs=len(runs),
        synthesis=synthesis,
        comparison=comparison,
        leads=lead_report(
            leads,
            verdicts,
            [(f.finding_id, f.file, f.start_line, f.end_line) for f in [*synthesis.findings, *synthesis.refuted]],
        ),
        sources=_sources(ws, [*synthesis.findings, *synthesis.refuted]) if sources else {},
        opinions=Opinions(
            threat_model=threat.model if threat else None,
            threat_model_origin=threat.origin if threat else None,
            context_state=context.state if context else None,
            context_reason=context.reason if context else "this audit started before context passes existed",
            verification_enabled=config.verification_pass,
            verify_severity=config.verify_severity,
            coverage_by_kind=by_kind,
        ),
        usage=spent,
    )
    return report, states


def _model(tx: Tx, audit_id: int, host_caps: dict[str, Any]) -> str | None:
    """The reviewers' model the audit's usage is priced at: the one its first forecast planned for, else the
    one its host named."""
    forecasts = tx.ledger_data(audit_id, FORECAST_ACTION)
    model = forecasts[0].get("model") if forecasts else None
    named = host_caps.get("model")
    return str(model) if model and model != UNKNOWN_MODEL else (str(named) if named else None)


def _sources(ws: Workspace, findings: Sequence[Finding]) -> dict[str, bytes]:
    """The current bytes of every file a finding names (as its place or a related one); unreadable ones are left
    out, and their SARIF results go without columns and line hashes."""
    paths = {f.file for f in findings} | {rel["file"] for f in findings for rel in f.related_locations}
    sources = {}
    for path in sorted(paths):
        try:
            sources[path] = resolve_inside(ws.root, path).read_bytes()
        except (PathError, OSError):
            continue
    return sources


def _changed(ws: Workspace, config: SessionConfig, files: list[FileRow]) -> list[str]:
    """Files in scope whose bytes no longer match the manifest (or are gone). A file whose status still says
    what it said when it was hashed (``file_stat``) is not read again."""
    changed = []
    for f in drift.unsettled(ws.root, config, files)[1]:
        try:
            data = resolve_inside(ws.root, f.path).read_bytes()
        except (PathError, OSError):
            changed.append(f.path)
            continue
        if hashlib.sha256(data).hexdigest() != f.sha256:
            changed.append(f.path)
    return changed


def synthesize(ws: Workspace) -> None:
    """Write the report files and mark the audit synthesized, unless files changed and went back to review."""
    with ws.store.read() as tx:
        audit = ws.require_audit(tx)
        files = tx.files(audit.audit_id)
    config = ws.config()
    changed = drift.detect(ws.root, config, files)
    if changed:
        with ws.store.write() as tx:
            requeued = drift.apply(tx, audit.audit_id, config, changed, ws.now())
        if requeued:
            return  # the changed files go back to review before any report is written
    report = write_report_files(ws, final=True)
    now = ws.now()
    with ws.store.write() as tx:
        audit = ws.require_audit(tx)
        tx.set_synthesized(audit.audit_id, now)
        tx.log(
            now=now,
            audit_id=audit.audit_id,
            actor="engine",
            action="synthesize",
            detail=f"{len(report.synthesis.findings)} finding(s), completeness {report.completeness}",
            outcome="ok",
        )


def write_report_files(ws: Workspace, *, final: bool = False) -> ReportInput:
    """The report in every format, from the store, written to this host's artifacts directory; a final one
    is also kept under report/audits/<N>/, where the next audit's reports never reach it."""
    report, states = report_and_cells(ws, final=final)
    texts = {
        "md": render_markdown(report),
        "json": json.dumps(render_json(report), indent=2) + "\n",
        "sarif": json.dumps(render_sarif(report), indent=2) + "\n",
        "html": page.page_html(ws, report, states),
    }
    documented = _paths(ws)
    for fmt, text in texts.items():
        write_atomic(documented[fmt], text)
        if not report.provisional:
            write_atomic(ws.audit_report_path(report.audit_id, fmt), text)
    return report


def write_page(ws: Workspace) -> None:
    """The page alone, written again (after a merge): open it mid-audit to see where the audit stands."""
    write_atomic(ws.report_html_path, page_now(ws))


def page_now(ws: Workspace, *, live: bool = False, audit_id: int | None = None) -> str:
    """The page from the store as it is now (``live``: the copy ``serve --http`` serves, which refreshes);
    ``audit_id``: an earlier audit's (default: the current one)."""
    return page.page_html(ws, *report_and_cells(ws, audit_id=audit_id, sources=False), live=live)


def page_version(ws: Workspace) -> str | None:
    """A tag for what the page is drawn from: it changes with every write to the store (None: no audit here)."""
    if not ws.has_state():
        return None
    with ws.store.read() as tx:
        audit = tx.current_audit()
        origin, generation = tx.generation()
    return None if audit is None else f"{origin}-{generation}-{audit.audit_id}"


def _paths(ws: Workspace) -> dict[str, Path]:
    """Where the current audit's report is written, by format."""
    return {
        "md": ws.report_md_path,
        "json": ws.report_json_path,
        "sarif": ws.report_sarif_path,
        "html": ws.report_html_path,
    }


def _audit_numbered(ws: Workspace, tx: Tx, audit_id: int) -> AuditRow:
    audit = tx.audit(audit_id)
    if audit is None:
        known = ", ".join(str(n) for n in tx.audit_ids()) or "none"
        raise NotFoundError(
            f"there is no audit {audit_id} in {ws.artifacts_dir} (its audits: {known}); `audit-mcp status` lists them"
        )
    return audit


def audit_in_flight(ws: Workspace) -> bool:
    """Whether the current audit has started and neither finished (its report written) nor been abandoned."""
    with ws.store_if_any() as tx:
        audit = tx.current_audit() if tx is not None else None
    return audit is not None and audit.synthesized_at is None and audit.abandoned_at is None


def write_current_report(ws: Workspace) -> bool:
    """The current audit's report in every format (provisional until it is synthesized), when there is an
    audit; whether there was one."""
    with ws.store_if_any() as tx:
        if tx is None or tx.current_audit() is None:
            return False
    write_report_files(ws)
    return True


def report_target(ws: Workspace, audit_id: int | None = None) -> tuple[AuditRow, str | None]:
    """The audit a report is of, and a note when it is not the current one: ``audit_id`` when given; else the
    current audit, unless it was abandoned and an earlier audit finished, whose report is then the last
    complete one (an abandoned audit's provisional report is ``--audit N``'s)."""
    ws.require_state()
    with ws.store.read() as tx:
        if audit_id is not None:
            return _audit_numbered(ws, tx, audit_id), None
        current = ws.require_audit(tx)
        finished = tx.latest_finished_audit() if current.abandoned_at else None
    if finished is None or current.abandoned_at is None:
        return current, None
    return finished, (
        f"audit {current.audit_id} was abandoned ({current.abandoned_at}); this is the report of audit "
        f"{finished.audit_id}, the latest that finished. `audit-mcp report --audit {current.audit_id}` prints "
        "the abandoned audit's provisional report."
    )


def report(ws: Workspace, fmt: str = "md", *, drop_refuted: bool = False, audit_id: int | None = None) -> str:
    """The report in ``fmt`` (md, json, sarif or html) of ``report_target``'s audit: final once synthesized
    (the written file, for the current audit), else provisional.

    ``drop_refuted`` (SARIF only) leaves refuted findings out, for uploads that ignore ``suppressions``.
    """
    paths = _paths(ws)
    if fmt not in paths:
        raise ConfigError(f"unknown report format {fmt!r}; use md, json, sarif or html")
    if drop_refuted and fmt != "sarif":
        raise ConfigError("--drop-refuted applies to --format sarif only; the other formats keep refuted findings")
    target, _ = report_target(ws, audit_id)
    with ws.store.read() as tx:
        current = ws.require_audit(tx)
    synthesized = target.synthesized_at is not None
    if synthesized and not drop_refuted:
        # A finished audit's report is the one written when it finished (the next audit's never reach it).
        written = paths[fmt] if target.audit_id == current.audit_id else ws.audit_report_path(target.audit_id, fmt)
        if written.exists():
            return written.read_text(encoding="utf-8")
    if fmt == "html":
        return page.page_html(ws, *report_and_cells(ws, final=synthesized, audit_id=target.audit_id, sources=False))
    built = build_report_input(ws, final=synthesized, audit_id=target.audit_id)
    if fmt == "md":
        return render_markdown(built)
    doc = render_json(built) if fmt == "json" else render_sarif(built, drop_refuted=drop_refuted)
    return json.dumps(doc, indent=2) + "\n"


def write_report(
    ws: Workspace, fmt: str = "md", *, audit_id: int | None = None, output: Path | None = None
) -> tuple[str, Path, bool, str | None]:
    """The report in ``fmt``, also written to a file, whether it is provisional, and a note on which audit it
    is of (``report_target``). The file is ``output`` when given (its folders made); else the documented path
    (report/report.<fmt>) for the current audit's report, and report/audits/<N>/report.<fmt> for another's.

    A finished audit's file is already there; a provisional one is written too, so a CI step that uploads
    report/report.sarif after a blocked or interrupted run finds it (the final report replaces it).
    """
    target, note = report_target(ws, audit_id)
    text = report(ws, fmt, audit_id=target.audit_id)
    provisional = target.synthesized_at is None
    with ws.store.read() as tx:
        current = ws.require_audit(tx)
    documented = _paths(ws)[fmt]
    if output is not None:
        path = output
    elif target.audit_id == current.audit_id:
        path = documented
    else:
        path = ws.audit_report_path(target.audit_id, fmt)
    if output is not None or provisional or not path.is_file():
        write_atomic(path, text)
    return text, path, provisional, note


def coverage(ws: Workspace) -> dict[str, Any]:
    """Coverage totals by state and lens, and the audit's completeness."""
    ws.require_state()
    with ws.store.read() as tx:
        audit = ws.require_audit(tx)
        counts = tx.cell_counts(audit.audit_id)
        return {
            "audit_id": audit.audit_id,
            "completeness": completeness(counts),
            "totals": totals(counts),
            "by_lens": tx.cell_counts_by_lens(audit.audit_id),
            "by_kind": tx.cell_counts_by_kind(audit.audit_id),
            "skipped_files": tx.file_counts(audit.audit_id).get("skipped", 0),
        }
