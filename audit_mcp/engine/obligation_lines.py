"""Lines of the step prompts that speak of the audit's obligations: the open cells of each kind, what a run of
each packet kind holds, and the forecast of the next run."""

from __future__ import annotations

from typing import Any

_KIND_NAMES = {"context": "threat model (context)", "review": "review", "verify": "verification"}


def obligations_line(by_kind: dict[str, dict[str, int]]) -> str:
    """The cells of each obligation that are still open, for the coverage line."""
    parts = []
    for kind, name in _KIND_NAMES.items():
        counts = by_kind.get(kind)
        if counts:
            still = counts.get("pending", 0) + counts.get("assigned", 0)
            parts.append(f"{name} {sum(counts.values())} ({still} open)")
    return (" By obligation: " + ", ".join(parts) + ".") if parts else ""


KIND_NOTES = {
    "context": "This run holds the **context packet**: one subagent reads the repository and writes the audit's "
    "threat model (what the software is, its entry points and who reaches them), which every review packet "
    "then carries. Review packets follow in the next run.",
    "review": "This run holds **review packets**: each subagent reviews its files under the lenses its prompt names.",
    "verify": "This run holds **verification packets**: each subagent tries to refute the findings its prompt "
    "lists (the most severe ones, and doubtful duplicates) and gives a verdict citing real lines. Use your "
    "strongest model where you can choose.",
}


def forecast_line(forecast: dict[str, Any] | None) -> str:
    """The next run as dispatch will plan it, for a host deciding how to answer."""
    if not forecast or not forecast.get("packets"):
        return "Nothing is left to review."
    later = forecast.get("cells_for_later_runs") or 0
    return (
        f"If you can launch subagents, the next run is {forecast['packets']}"
        + {"context": " context packet(s) (the threat model)", "verify": " verification packet(s)"}.get(
            forecast.get("packet_kind", "review"), " packet(s)"
        )
        + f" in {forecast['waves']} "
        f"wave(s) of at most {forecast['wave_size']}, ~{forecast['estimated_input_tokens']:,} input tokens, "
        f"{forecast['time_range']}"
        + (f"; {later} more cell(s) wait for later runs." if later else ".")
        + " (Planned for the answers known so far; a different number of subagents changes the waves.)"
    )
