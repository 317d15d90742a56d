"""The status view as a table a person reads in a terminal."""

from __future__ import annotations

from collections.abc import Sequence

from audit_mcp.core.forecast_text import audit_lines
from audit_mcp.core.models import StatusView
from audit_mcp.store.records import CellState

_STATES = [s.value for s in CellState]
_HEADINGS = {"not_applicable": "n/a"}


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    cells = [[str(v) for v in header], *[[str(v) for v in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    numeric = [bool(rows) and all(str(row[i]).isdigit() for row in rows) for i in range(len(header))]
    out = []
    for n, row in enumerate(cells):
        parts = [v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i]) for i, v in enumerate(row)]
        out.append("  " + "  ".join(parts).rstrip())
        if n == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    return out


def render_status(view: StatusView) -> str:
    if view.audit_id is None:
        return f"audit-mcp status: {view.repo_root}\n\n{view.message or 'No audit has started here yet.'}\n"
    lines = [f"audit-mcp status: {view.repo_root}", f"audit {view.audit_id}, completeness: {view.completeness}"]
    if view.blocker:
        lines.append(f"BLOCKED: {view.blocker}")
    lines += ["", "Coverage by lens (tasks)"]
    rows = [
        [lens, *(counts.get(s, 0) for s in _STATES), sum(counts.values())]
        for lens, counts in sorted(view.coverage_by_lens.items())
    ]
    rows.append(["all", *(view.coverage.get(s, 0) for s in _STATES), sum(view.coverage.get(s, 0) for s in _STATES)])
    lines += _table(["lens", *(_HEADINGS.get(s, s) for s in _STATES), "total"], rows)
    if view.skipped_files:
        lines += ["", f"Skipped at intake ({view.skipped_files} file(s))"]
        lines += [f"  {n:>5}  {why}" for why, n in view.skipped_by_reason.items()]
        lines += [f"  {s['file']}: {s['reason']}" for s in view.skipped[:10]]
        if view.skipped_files > 10:
            lines.append(f"  ... and {view.skipped_files - 10} more (`status --json` lists 50, the report all)")
    lines += ["", "Runs"]
    if view.runs:
        lines += _table(
            ["run", "kind", "packets of", "state", "packets", "submitted", "waves"],
            [
                [
                    r["run_id"],
                    r["kind"],
                    r.get("packet_kind", "review"),
                    r["state"],
                    r["packets"],
                    r["submitted"],
                    _waves(r["waves"]),
                ]
                for r in view.runs
            ],
        )
    else:
        lines.append("  none yet")
    total = sum(view.findings_by_severity.values())
    lines += ["", f"Findings ({total})", "  " + "  ".join(f"{sev} {n}" for sev, n in view.findings_by_severity.items())]
    if view.refuted:
        lines.append(f"  ({view.refuted} refuted by a verifier, kept in the report's refuted section)")
    lines += ["", "Obligations"]
    lines += _obligations(view.obligations)
    lines += ["", f"Gaps ({view.gaps_total})"]
    lines += [
        f"  {g['file']}:{g['lines']} [{g['lens']}] {g['state']}: {g['reason'] or ''}".rstrip() for g in view.gaps
    ] or ["  none"]
    if view.gaps_total > len(view.gaps):
        lines.append(f"  ... and {view.gaps_total - len(view.gaps)} more (the report names every gap)")
    lines += ["", "What remains"]
    lines += _forecast(view)
    return "\n".join(lines) + "\n"


def _forecast(view: StatusView) -> list[str]:
    f = view.forecast
    out = []
    if f.get("open_run"):
        out.append(f"  run {f['open_run']}: {f['open_run_packets_outstanding']} packet(s) not yet submitted")
    if f.get("pending_cells"):
        later = f.get("cells_for_later_runs") or 0
        out.append(
            f"  {f['pending_cells']} task(s) waiting: the next run is {f['next_run_packets']} packet(s) in waves "
            f"{_waves(f['next_run_waves'])}, ~{f.get('estimated_input_tokens', 0):,} input tokens, "
            f"{f.get('time_range', '')}" + (f"; {later} task(s) for later runs" if later else "")
        )
    if f.get("cooldown_until"):
        out.append(f"  rate-limit cooldown until {f['cooldown_until']}")
    whole = f.get("audit")
    if isinstance(whole, dict) and whole.get("packets"):
        out += [f"  {line}" for line in audit_lines(whole)]
    if not out:
        out.append("  nothing: every task has an outcome" if view.completeness != "unknown" else "  unknown")
    return out


def _states(cells: object) -> str:
    counts = cells if isinstance(cells, dict) else {}
    shown = ", ".join(f"{n} {_HEADINGS.get(state, state)}" for state, n in counts.items() if n and state != "total")
    return f"{counts.get('total', 0)} cell(s)" + (f" ({shown})" if shown else "")


def _obligations(obligations: dict[str, object]) -> list[str]:
    context = obligations.get("context")
    verify = obligations.get("verification")
    runtime = obligations.get("runtime_evidence")
    out = []
    if isinstance(context, dict):
        written = f"written ({context['threat_model']})" if context.get("threat_model") else context.get("note")
        out.append(f"  threat model: {_states(context.get('cells'))}; {written or 'not yet written'}")
    if isinstance(verify, dict):
        statuses = verify.get("findings_by_status") or {}
        by_status = ", ".join(f"{n} {s}" for s, n in statuses.items()) if isinstance(statuses, dict) else ""
        state = f"threshold {verify.get('threshold')}" if verify.get("enabled") else "off"
        out.append(
            f"  verification: {_states(verify.get('cells'))}; {state}; {verify.get('due', 0)} finding(s) or pair(s)"
            f" due a verifier; findings: {by_status or 'none'}"
        )
    if isinstance(runtime, dict):
        out.append(f"  runtime evidence: {runtime.get('attached', 0)} attached")
    return out or ["  none"]


def _waves(waves: object) -> str:
    """A run's waves as ``4+4+2`` (``-`` before any)."""
    return "+".join(str(w) for w in waves) if isinstance(waves, list) and waves else "-"
