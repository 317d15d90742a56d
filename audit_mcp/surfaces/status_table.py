"""The status view as a table a person reads in a terminal."""

from __future__ import annotations

from collections.abc import Sequence

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
        return (
            f"audit-mcp status: {view.repo_root}\n\nNo audit has started here yet. Start one with "
            "`audit-mcp next-step`, `audit-mcp run`, or your host's start_audit prompt.\n"
        )
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
            ["run", "kind", "state", "packets", "submitted", "waves"],
            [
                [
                    r["run_id"],
                    r["kind"],
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
    if not out:
        out.append("  nothing: every task has an outcome" if view.completeness != "unknown" else "  unknown")
    return out


def _waves(waves: object) -> str:
    """A run's waves as ``4+4+2`` (``-`` before any)."""
    return "+".join(str(w) for w in waves) if isinstance(waves, list) and waves else "-"
