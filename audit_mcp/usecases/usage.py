"""What an audit used, from the usage its runs reported: each merge keeps its run's totals in the ledger (the
usage submitted with each packet, and what ``audit-mcp run`` read from its workers' output, which wins key by
key), and the report sums them beside the forecast shown with the first dispatch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.checks import USAGE_BOUNDS
from audit_mcp.store.tx import Tx
from audit_mcp.usecases.audit_forecast import FORECAST_ACTION
from audit_mcp.usecases.forecast_sums import used_cost

MERGE_ACTION = "merge_and_ingest"


def usage_data(
    run_id: str, usage: Sequence[Mapping[str, Any]], merged: int, failures: Mapping[str, str]
) -> dict[str, Any]:
    """What a merge keeps in its ledger entry: the run, its packets' usage summed, how many reported any, and
    each failed packet's failure class."""
    totals = {key: 0.0 for key in USAGE_BOUNDS}
    reporting = 0
    for u in usage:
        numbers = {k: float(v) for k, v in u.items() if k in totals and isinstance(v, int | float)}
        reporting += bool(numbers)
        for key, value in numbers.items():
            totals[key] += value
    return {
        "run_id": run_id,
        "packets_merged": merged,
        "packets_reporting": reporting,
        "usage": {k: v for k, v in totals.items() if v},
        "failures": dict(failures),
    }


def used(tx: Tx, audit_id: int, config: SessionConfig, model: str | None) -> dict[str, Any]:
    """The audit's reported usage so far (merged runs), its cost at ``model``'s configured prices, and the
    forecast kept from its first dispatch (None for an audit dispatched before forecasts were kept)."""
    totals: dict[str, float] = {}
    merged = reporting = runs = 0
    for data in tx.ledger_data(audit_id, MERGE_ACTION):
        runs += 1
        merged += int(data.get("packets_merged") or 0)
        reporting += int(data.get("packets_reporting") or 0)
        for key, value in (data.get("usage") or {}).items():
            if isinstance(value, int | float) and key in USAGE_BOUNDS:
                totals[key] = totals.get(key, 0.0) + float(value)
    forecasts = tx.ledger_data(audit_id, FORECAST_ACTION)
    _source, prices = config.prices.for_model(model)
    return {
        "runs_merged": runs,
        "packets_merged": merged,
        "packets_reporting": reporting,
        "usage": totals,
        "cost": used_cost(totals, prices, config.prices.currency) if reporting else None,
        "currency": config.prices.currency if prices is not None else None,
        "model": model,
        "forecast_at_first_dispatch": forecasts[0] if forecasts else None,
    }
