"""The audit report: Markdown for people, JSON for tools."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from audit_mcp.core.escape import md_block, md_cell, md_code, md_fence, md_inline
from audit_mcp.core.forecast_text import audit_lines, usage_line
from audit_mcp.findings.comparison import NEW, PERSISTING, Comparison
from audit_mcp.findings.report_opinions import (
    Opinions,
    doubtful_section,
    opinions_json,
    refuted_section,
    runtime_lines,
    severity_label,
    summary_line,
    threat_model_section,
    verdict_lines,
)
from audit_mcp.findings.synthesis import Finding, Synthesis
from audit_mcp.store.records import Cell, CellKind, CellState, FileRow

REPORT_SCHEMA_VERSION = "audit-mcp.report/1"


@dataclass(frozen=True)
class ReportInput:
    repo_name: str
    root: str
    audit_id: int
    created_at: str
    generated_at: str
    git_head: str | None
    git_dirty: bool
    manifest_digest: str
    completeness: str
    lenses: Sequence[str]
    coverage_by_lens: Mapping[str, Mapping[str, int]]
    totals: Mapping[str, int]
    gap_cells: Sequence[Cell]
    skipped_files: Sequence[FileRow]
    changed_since_snapshot: Sequence[str]
    runs: int
    synthesis: Synthesis
    comparison: Comparison | None = None
    leads: Sequence[Mapping[str, Any]] = ()
    # The current bytes of the files findings name, for SARIF's columns and line hashes (absent: unknown).
    sources: Mapping[str, bytes] = field(default_factory=dict)
    provisional: bool = False  # the audit has not finished: the report changes as reviews arrive
    completeness_reason: str | None = None  # why it is not complete when that is not a gap (nothing in scope)
    blocker: str | None = None
    abandoned: str | None = None  # when and why the audit was abandoned: its report stays provisional for good
    carried: Mapping[int, int] = field(default_factory=dict)  # cells carried unchanged, by the audit that reviewed them
    scripted_reviewers: Sequence[str] = ()  # labels of programs, not models, that answered the packets
    opinions: Opinions = field(default_factory=Opinions)
    # What the runs reported using, beside the forecast shown with the first dispatch (``usecases.usage``).
    usage: Mapping[str, Any] | None = None


def _at(path: str, start: int, end: int | None = None) -> str:
    """``path:start-end`` as a code span that no backtick in the name can close."""
    lines = f"{start}" if end is None or end == start else f"{start}-{end}"
    return md_code(f"{path}:{lines}")


def render_markdown(r: ReportInput) -> str:
    s = r.synthesis
    counts = s.by_severity()
    confirmed = confirmed_leads(r.leads)
    out = [f"# Audit report: {md_inline(r.repo_name)}", ""]
    out.append(
        f"**Completeness: {r.completeness}**. {r.totals.get('total', 0)} cells (file or chunk × lens), "
        f"{r.totals.get('reviewed', 0)} reviewed, {r.totals.get('not_applicable', 0)} not applicable, "
        f"{r.totals.get('failed', 0)} failed, {r.totals.get('skipped', 0)} skipped; {r.runs} run(s)."
    )
    if r.carried:
        out.append(f"\n{carried_line(r)}")
    out += [f"\n{line}" for line in honesty_notes(r)]
    head = r.git_head[:12] if r.git_head else "no git HEAD"
    out.append(
        f"Snapshot: {head}{' (working tree dirty)' if r.git_dirty else ''}, manifest "
        f"{r.manifest_digest[:12]}, audit {r.audit_id} started {r.created_at}, report {r.generated_at}."
    )
    if r.changed_since_snapshot:
        shown = ", ".join(md_code(p) for p in r.changed_since_snapshot[:20])
        more = len(r.changed_since_snapshot) - 20
        out.append(
            f"\n> **Warning:** {len(r.changed_since_snapshot)} file(s) changed after the audit read them: {shown}"
            f"{f' and {more} more' if more > 0 else ''}. Findings there may point at moved lines."
        )
    out += ["", "Findings: " + ", ".join(f"{n} {sev}" for sev, n in counts.items()) + ".", ""]
    out += [
        summary_line(s, r.opinions) + (f' {len(s.refuted)} refuted (see "Refuted findings").' if s.refuted else ""),
        "",
    ]
    if r.comparison is not None:
        c = r.comparison.counts()
        out += [
            f"Compared with audit {r.comparison.baseline_audit_id}: {c['new']} new, {c['persisting']} "
            f"persisting, {c['resolved']} resolved, {c['not_rechecked']} not rechecked (see "
            '"Changes since the previous audit").',
            "",
        ]

    out += ["## Work blocks", ""]
    if s.blocks:
        out += ["Units of change in the suggested order, most severe first; each names the findings it settles.", ""]
    if not s.blocks:
        out.append(_nothing_found(r))
    for b in s.blocks:
        out.append(f"### {b.block_id}. [{b.severity.upper()}] {md_inline(b.title)}")
        out.append(
            f"Effort: {b.effort}. Files: {', '.join(md_code(f) for f in b.files)}. One change: {md_inline(b.basis)}."
        )
        by_id = {f.finding_id: f for f in s.findings}
        for fid in b.finding_ids:
            f = by_id[fid]
            tag = f" ({f.status.replace('_', ' ')})" if f.status != "unverified" else ""
            out.append(f"- {fid} {_at(f.file, f.start_line)} {md_inline(f.title)}{tag}")
        out.append("")

    out += ["## Findings", ""]
    if not s.findings:
        out.append("No findings were reported so far." if r.provisional else "No findings were reported.")
    for f in s.findings:
        out.append(f"### {f.finding_id} [{severity_label(f)}] {md_inline(f.title)}")
        meta = (
            _at(f.file, f.start_line, f.end_line)
            + (f" in {md_code(f.symbol)}" if f.symbol else "")
            + f" · lens: {', '.join(f.lenses)} · confidence: {f.confidence} · category: {f.category_id}"
            + (f" (reported as {md_inline(f.category)})" if f.category != f.category_id else "")
            + f" · fingerprint: `{f.fingerprint}` · status: {f.status.replace('_', ' ')}"
            + (f" · {r.comparison.states[f.fingerprint]}" if r.comparison is not None else "")
        )
        out += [
            meta,
            "",
            md_block(f.description),
            "",
            md_fence(f.evidence),
            "",
            f"**Recommendation:** {md_block(f.recommendation)}",
        ]
        if f.finding_id in confirmed:
            out.append(f"Confirms analyzer lead(s): {', '.join(confirmed[f.finding_id])}.")
        if f.carried_from:
            out.append(f"Carried from {carried_label(f.carried_from)}: its lines are unchanged since that review.")
        if f.kept_open:
            out.append(f"Kept open: {md_inline(f.kept_open)}.")
        if len(f.severity_reasons) > 1:
            out.append(
                f"Reported {len(f.severity_reasons)} times; the severity is the highest of: "
                f"{'; '.join(md_inline(x) for x in f.severity_reasons)}."
            )
        if len(f.locations) > 1:
            out.append("Also reported at lines " + ", ".join(f"{a}-{b}" for a, b in f.locations[1:]) + ".")
        for rel in f.related_locations:
            out.append(f"- related ({md_inline(rel['role'])}): {_at(rel['file'], rel['start_line'], rel['end_line'])}")
        opinion = verdict_lines(f)
        out += ["", *opinion] if opinion else []
        evidence = runtime_lines(f)
        out += ["", *evidence] if evidence else []
        out.append("")

    out += refuted_section(s)
    out += threat_model_section(r.opinions)
    out += doubtful_section(s)

    if r.comparison is not None:
        out += _comparison_section(r.comparison)
    if r.leads:
        out += _leads_section(r.leads)
    if r.usage is not None:
        out += _usage_section(r.usage)
    out += [
        "## Coverage",
        "",
        "| lens | " + " | ".join(s.value for s in CellState) + " |",
        "|---|" + "---|" * len(CellState),
    ]
    for lens in r.lenses:
        row = r.coverage_by_lens.get(lens, {})
        out.append(f"| {lens} | " + " | ".join(str(row.get(s.value, 0)) for s in CellState) + " |")
    for kind, label in ((CellKind.CONTEXT, "threat model (context)"), (CellKind.VERIFY, "verification")):
        row = r.opinions.coverage_by_kind.get(kind, {})
        if row:
            out.append(f"| {label} | " + " | ".join(str(row.get(s.value, 0)) for s in CellState) + " |")
    out += ["", "### Gaps", ""]
    if not r.gap_cells and not r.skipped_files:
        out.append(
            "None: every file in scope was reviewed under every lens."
            if r.completeness == "complete"
            else "None so far."
            if r.provisional
            else "None listed; see the completeness note above."
        )
    for gap in r.gap_cells:
        out.append(
            f"- {gap.state}: {md_code(gap.path)} lines {gap.start_line}-{gap.end_line}, lens {gap.lens}"
            f"{f': {md_inline(gap.reason)}' if gap.reason else ''}"
        )
    for fr in r.skipped_files:
        out.append(f"- skipped file: {md_code(fr.path)}: {md_inline(fr.skip_reason or '')}")
    return "\n".join(out).rstrip() + "\n"


def carried_line(r: ReportInput) -> str:
    """How much of the audit is carried from earlier reviews, and from which audits."""
    total = sum(r.carried.values())
    by = "; ".join(f"{n} reviewed in audit {a}" for a, n in sorted(r.carried.items()))
    reviewed_here = r.totals.get("reviewed", 0) + r.totals.get("not_applicable", 0)
    scope = (
        "This audit reviewed nothing itself: every cell was carried."
        if not reviewed_here and total == r.totals.get("total", 0) - r.totals.get("skipped", 0)
        else f"This audit reviewed {reviewed_here} cell(s) itself: what changed, and what no audit had reviewed."
    )
    return f"Carried forward, content unchanged since its review: {total} cell(s) ({by}). {scope}"


def carried_label(origin: Mapping[str, Any]) -> str:
    """``audit 2 (commit 3f9c2ab1)``: where a carried finding was reported."""
    head = origin.get("git_head")
    return f"audit {origin.get('audit_id')}" + (f" (commit {str(head)[:12]})" if head else "")


def _reviewed_line(r: ReportInput) -> str:
    open_cells = r.totals.get("pending", 0) + r.totals.get("assigned", 0)
    return f"{r.totals.get('reviewed', 0)} of {r.totals.get('total', 0)} cells reviewed, {open_cells} still open"


def honesty_notes(r: ReportInput) -> list[str]:
    """What the reader must know before trusting the rest: scripted reviews, a provisional state, an empty scope."""
    notes = []
    if r.scripted_reviewers:
        notes.append(
            f"> **Reviews: scripted.** Every packet was answered by a {'; '.join(r.scripted_reviewers)}. The "
            "findings show how the audit runs, not what any model found in this code."
        )
    if r.provisional and r.abandoned:
        notes.append(
            f"> **Provisional, abandoned:** the audit was abandoned ({md_inline(r.abandoned)}) and will not finish: "
            f"{_reviewed_line(r)}. This is what it had found when it stopped; a new audit writes a final report."
        )
    elif r.provisional:
        state = f"blocked ({md_inline(r.blocker)})" if r.blocker else "still running"
        notes.append(
            f"> **Provisional:** the audit is {state}: {_reviewed_line(r)}. Findings and gaps change as reviews "
            "arrive; the final report is written when every cell has an outcome."
        )
    if r.completeness_reason:
        notes.append(f"> {r.completeness_reason}")
    return notes


def _nothing_found(r: ReportInput) -> str:
    if r.provisional:
        return f"No findings so far ({_reviewed_line(r)})."
    if r.completeness == "complete":
        return "No findings, so nothing to fix."
    return "No findings in what was reviewed; the gaps below were not reviewed."


def _usage_section(usage: Mapping[str, Any]) -> list[str]:
    """The forecast shown with the first dispatch, and what the runs reported using."""
    out = ["## Forecast and usage", ""]
    before = usage.get("forecast_at_first_dispatch")
    if before:
        out += ["Forecast with the first dispatch:", ""] + [f"- {md_inline(line)}" for line in audit_lines(before)]
    else:
        out.append("No forecast was kept for this audit (it was dispatched before forecasts were kept).")
    return [*out, "", md_inline(usage_line(usage)), ""]


def _comparison_section(c: Comparison) -> list[str]:
    out = ["## Changes since the previous audit", "", f"Matched by fingerprint against audit {c.baseline_audit_id}."]
    for label, state in (("New", NEW), ("Persisting", PERSISTING)):
        ids = [fp for fp, st in c.states.items() if st == state]
        out.append(f"- {label}: {len(ids)}.")
    out.append(f"- Resolved (each for the reason given): {len(c.resolved)}.")
    for f in c.resolved:
        out.append(
            f"  - [{f.severity}] {md_inline(f.title)} ({_at(f.file, f.start_line)}, fingerprint `{f.fingerprint}`): "
            f"{md_inline(c.why.get(f.fingerprint, 'no longer reported'))}"
        )
    out.append(f"- Not rechecked (their file and lens were not reviewed this time): {len(c.not_rechecked)}.")
    for f in c.not_rechecked:
        out.append(
            f"  - [{f.severity}] {md_inline(f.title)} ({_at(f.file, f.start_line)}, fingerprint `{f.fingerprint}`)"
        )
    return [*out, ""]


def _leads_section(leads: Sequence[Mapping[str, Any]]) -> list[str]:
    statuses = [x["status"] for x in leads]
    tools = sorted({x["tool"] for x in leads})
    out = [
        "## Analyzer leads",
        "",
        f"{len(leads)} alert(s) from {', '.join(md_inline(t) for t in tools)}, each checked by a reviewer: "
        + ", ".join(f"{statuses.count(s)} {s}" for s in ("confirmed", "refuted", "disputed", "unchecked"))
        + ".",
        "",
        "| lead | rule | where | status | findings | reviewer's reason |",
        "|---|---|---|---|---|---|",
    ]
    for x in leads:
        reasons = "; ".join(f"{v['verdict']}: {v['reason']}" for v in x["verdicts"]) or "not reviewed"
        where = md_code(f"{x['file']}:{x['start_line']}", in_table=True)
        out.append(
            f"| {x['lead_id']} | {md_cell(x['tool'])} {md_cell(x['rule_id'])} | {where} | "
            f"{x['status']} | {', '.join(x['findings']) or '-'} | {md_cell(reasons)} |"
        )
    return [*out, ""]


def confirmed_leads(leads: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Finding id -> the confirmed leads at its lines, as "L002 Bandit B608"."""
    out: dict[str, list[str]] = {}
    for lead in leads:
        if lead["status"] == "confirmed":
            for fid in lead["findings"]:
                out.setdefault(fid, []).append(f"{lead['lead_id']} {lead['tool']} {lead['rule_id']}")
    return out


def _finding_json(f: Finding, comparison: Comparison | None, confirmed: Mapping[str, list[str]]) -> dict[str, Any]:
    doc = f.as_json()
    doc["baseline_state"] = comparison.states[f.fingerprint] if comparison is not None else None
    doc["confirms_leads"] = [x.split(" ", 1)[0] for x in confirmed.get(f.finding_id, [])]
    return doc


def render_json(r: ReportInput) -> dict[str, Any]:
    s = r.synthesis
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "repo": {"name": r.repo_name, "root": r.root},
        "audit": {"audit_id": r.audit_id, "created_at": r.created_at, "generated_at": r.generated_at, "runs": r.runs},
        "snapshot": {
            "git_head": r.git_head,
            "git_dirty": r.git_dirty,
            "manifest_digest": r.manifest_digest,
            "changed_since_snapshot": list(r.changed_since_snapshot),
        },
        "completeness": r.completeness,
        "completeness_reason": r.completeness_reason,
        "provisional": r.provisional,
        "carried": {"cells": sum(r.carried.values()), "by_audit": {str(a): n for a, n in sorted(r.carried.items())}},
        "reviews": {"scripted": bool(r.scripted_reviewers), "by": list(r.scripted_reviewers)},
        "summary": {"findings_by_severity": s.by_severity(), "work_blocks": len(s.blocks), "refuted": len(s.refuted)},
        "work_blocks": [b.as_json() for b in s.blocks],
        "findings": [_finding_json(f, r.comparison, confirmed_leads(r.leads)) for f in s.findings],
        "refuted": [_finding_json(f, r.comparison, confirmed_leads(r.leads)) for f in s.refuted],
        **opinions_json(s, r.opinions),
        "comparison": r.comparison.as_json() if r.comparison is not None else None,
        "leads": [dict(x) for x in r.leads],
        "usage": dict(r.usage) if r.usage is not None else None,
        "coverage": {
            "totals": dict(r.totals),
            "by_lens": {k: dict(v) for k, v in r.coverage_by_lens.items()},
            "by_kind": {k: dict(v) for k, v in r.opinions.coverage_by_kind.items()},
        },
        "gaps": {
            "cells": [
                {
                    "task_id": c.task_id,
                    "file": c.path,
                    "start_line": c.start_line,
                    "end_line": c.end_line,
                    "lens": c.lens,
                    "state": c.state,
                    "reason": c.reason,
                }
                for c in r.gap_cells
            ],
            "skipped_files": [{"file": f.path, "reason": f.skip_reason} for f in r.skipped_files],
        },
    }
