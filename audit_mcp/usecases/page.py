"""The audit page's data beyond the report: each run as a timeline, what remains, and the usage reported.

``reporting`` reads the report and the cells and hands them here; ``findings.page_data`` and
``findings.page`` turn all of it into the page. The page is written to report/report.html whenever the
report files are, and after every merge, so it can be opened while the audit runs; ``serve --http`` serves
it live at ``/``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from audit_mcp.findings.page import render_page
from audit_mcp.findings.page_data import CellStates, page_document
from audit_mcp.findings.report import ReportInput
from audit_mcp.scheduling.failures import cooldown_until
from audit_mcp.store.records import PacketRow, RunRow
from audit_mcp.usecases import forecasting
from audit_mcp.usecases.workspace import Workspace, iso

# The usage figures a submission may report (``Usage`` in the results' schema), summed per run and overall.
USAGE_KEYS = ("input_tokens", "output_tokens", "api_calls", "seconds", "rate_limited_calls")


def page_html(ws: Workspace, report: ReportInput, cells: Sequence[CellStates], *, live: bool = False) -> str:
    """The page for this report and these cells, with the audit's runs, forecast and usage read now."""
    return render_page(page_doc(ws, report, cells), live=live)


def page_doc(ws: Workspace, report: ReportInput, cells: Sequence[CellStates]) -> dict[str, Any]:
    """The page's document for the report's audit (the current one, or an earlier one by number)."""
    audit_id = report.audit_id
    with ws.store.read() as tx:
        current = tx.current_audit()
        runs = tx.runs(audit_id, plan=False)
        waves = tx.run_waves(audit_id)
        packets = {r.run_id: tx.packets(r.run_id) for r in runs}
        submissions = tx.run_submissions(audit_id)
        failures = tx.failures(audit_id)
    waiting = report.provisional and not report.blocker and not report.abandoned
    return page_document(
        report,
        cells,
        runs=timeline(runs, waves, packets, submissions, failures),
        # What remains is forecast for the audit still going on, as status forecasts it.
        forecast=_forecast(ws) if waiting and current is not None and current.audit_id == audit_id else None,
        usage=usage(submissions),
    )


def timeline(
    runs: Sequence[RunRow],
    waves: Mapping[str, Sequence[Any]],
    packets: Mapping[str, Sequence[PacketRow]],
    submissions: Sequence[tuple[str, str, Mapping[str, Any]]],
    failures: Sequence[Mapping[str, str]],
) -> list[dict[str, Any]]:
    """Each run as the page draws it: when it was dispatched and merged, its width and waves, when each
    packet was handed in, its failures by kind, and its rate-limit refusals with the cooldown each set."""
    handed: dict[str, list[str]] = defaultdict(list)
    used: dict[str, Counter[str]] = defaultdict(Counter)
    for run_id, at, numbers in submissions:
        handed[run_id].append(at)
        used[run_id].update(_numbers(numbers))
    failed: dict[str, list[Mapping[str, str]]] = defaultdict(list)
    for f in failures:
        failed[f["run_id"]].append(f)
    out = []
    for run in runs:
        limited = [f for f in failed[run.run_id] if f["kind"] == "rate_limited"]
        its = packets.get(run.run_id, [])
        out.append(
            {
                "run_id": run.run_id,
                "kind": run.kind,
                "packet_kind": its[0].kind if its else "review",
                "state": run.state,
                "created_at": run.created_at,
                "merged_at": run.merged_at,
                "wave_size": run.wave_size,
                "waves": [len(w) if isinstance(w, list) else int(w) for w in waves.get(run.run_id, [])],
                "packets": len(its),
                "submitted": len(handed[run.run_id]),
                "failures": dict(Counter(f["kind"] for f in failed[run.run_id])),
                "rate_limited": [f["at"] for f in limited],
                "cooldowns": [[f["at"], iso(cooldown_until(f["detail"], _moment(f["at"])))] for f in limited],
                "submissions": handed[run.run_id],
                "usage": dict(used[run.run_id]),
            }
        )
    return out


def usage(submissions: Sequence[tuple[str, str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The usage the submissions reported, summed, and how many reported any."""
    total: Counter[str] = Counter()
    reported = 0
    for _run, _at, numbers in submissions:
        figures = _numbers(numbers)
        reported += bool(figures)
        total.update(figures)
    return {**{k: total.get(k, 0) for k in USAGE_KEYS}, "submissions": reported}


def _numbers(numbers: Mapping[str, Any]) -> dict[str, float]:
    """The usage figures of one submission (validated when it was accepted: finite and bounded)."""
    return {
        k: v for k in USAGE_KEYS if isinstance(v := numbers.get(k), int | float) and not isinstance(v, bool) and v > 0
    }


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _forecast(ws: Workspace) -> dict[str, Any] | None:
    """What remains, as ``status`` shows it: the next run for the host the audit remembers."""
    config = ws.config()
    with ws.store.read() as tx:
        audit = ws.require_audit(tx)
        caps = forecasting.remembered_caps(config, audit.host_caps)
    forecast = forecasting.forecast(ws, config, caps)
    if forecast is None:
        return None
    return {
        "pending_cells": forecast["pending_cells"],
        "next_run_packets": forecast["packets"],
        "next_run_waves": forecast["wave_sizes"],
        "cooldown_until": forecast["cooldown_until"],
        "estimated_input_tokens": forecast["estimated_input_tokens"],
        "estimated_output_tokens": forecast["estimated_output_tokens"],
        "time_range": forecast["time_range"],
        "cells_for_later_runs": forecast["cells_for_later_runs"],
    }
