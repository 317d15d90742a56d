"""Between the use cases and the pure scheduler: settings, limits seen in headers, and what a run taught.

Knobs (README, "Rate limits and waves"): ``[scheduler]`` in the session config
(``half_life_hours``, ``wave_kind``, ``probe``); the environment variables
``AUDIT_MCP_HALF_LIFE_HOURS``, ``AUDIT_MCP_WAVE_KIND``, ``AUDIT_MCP_PROBE`` win
over the file, and ``core.config`` has already applied and validated them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from audit_mcp.core.config import SchedulerConfig
from audit_mcp.scheduling.learning import RunOutcome
from audit_mcp.scheduling.limits import Limit, ResolvedLimits
from audit_mcp.scheduling.profile import Learned
from audit_mcp.scheduling.ratelimits import parse_error_text
from audit_mcp.scheduling.scheduler import Forecast, Schedule

# Hosts that wait for a whole batch before starting the next one.
_WHOLE_WAVE_CLIENTS = ("cursor",)


@dataclass(frozen=True)
class Pacing:
    half_life: timedelta
    wave_kind: str
    probe: str


def iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def pacing_settings(config: SchedulerConfig, client_name: str | None) -> Pacing:
    """The scheduler's settings: the session config (with the environment's overrides), else what the client is."""
    kind = config.wave_kind
    if kind is None:
        whole = client_name is not None and any(c in client_name.lower() for c in _WHOLE_WAVE_CLIENTS)
        kind = "whole_wave" if whole else "rolling"
    return Pacing(timedelta(hours=config.half_life_hours), kind, config.probe)


def with_observed(limits: ResolvedLimits, learned: Learned) -> ResolvedLimits:
    """Limits read from the provider's own rate-limit headers win, at high confidence."""
    if not learned.observed_limits:
        return limits
    merged = dict(limits.limits)
    seen = iso(learned.observed_at) or "earlier"
    for key, value in learned.observed_limits.items():
        if key in merged and value > 0:
            merged[key] = Limit(value, f"rate-limit headers seen {seen}", "high")
    return ResolvedLimits(limits.provider, limits.model, merged)


def run_outcome(
    *,
    launched: int,
    wave_size: int,
    succeeded: int,
    reported: Mapping[str, str],
    usage: Sequence[tuple[Mapping[str, Any], int]],
    now: datetime,
    printed: Mapping[str, str] | None = None,
) -> RunOutcome:
    """What a merged run says: rate-limited failures, waits, hard stops, limits quoted in errors, usage.

    ``printed`` is what successful workers printed about rate limits, by packet: read as error text is
    (quoted limits, hard stops), while those packets' success stands.
    """
    signals = [parse_error_text(text, now) for text in reported.values()]
    limited = [s for s in signals if s.rate_limited]
    waits = [w for s in limited if (w := s.wait_until(now)) is not None]
    observed: dict[str, int] = {}
    for s in signals:
        observed.update(s.limits)
    hard = next((s.hard_stop for s in signals if s.hard_stop), None)
    for packet_id, text in (printed or {}).items():
        signal = parse_error_text(text, now)
        observed.update(signal.limits)
        if signal.hard_stop and hard is None:
            hard = f"{signal.hard_stop} (printed by the worker of packet {packet_id}, whose work is kept)"
    return RunOutcome(
        launched=launched,
        wave_size=wave_size,
        succeeded=succeeded,
        rate_limited=len(limited),
        wait_until=max(waits) if waits else None,
        hard_stop=hard,
        observed_limits=observed,
        usage=[{k: float(v) for k, v in u.items()} for u, _ in usage if u],
        estimated_tokens=[tokens for u, tokens in usage if u],
        absorbed=int(sum(float(u.get("rate_limited_calls") or 0) for u, _ in usage if u)),
    )


def forecast_view(forecast: Forecast) -> dict[str, Any]:
    low, high = forecast.seconds_low, forecast.seconds_high
    return {
        "packets": forecast.packets,
        "waves": forecast.waves,
        "estimated_input_tokens": forecast.estimated_input_tokens,
        "estimated_output_tokens": forecast.estimated_output_tokens,
        "seconds_low": low,
        "seconds_high": high,
        "time_range": f"about {_minutes(low)} to {_minutes(high)}" if forecast.packets else "nothing to do",
    }


def _minutes(seconds: int) -> str:
    return f"{max(1, round(seconds / 60))} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def schedule_view(result: Schedule, pacing: Pacing, key: str) -> dict[str, Any]:
    """The schedule as it goes into a dispatch plan and ``quota_status``."""
    return {
        "state_key": key,
        "wave_kind": pacing.wave_kind,
        "physical_cap": result.physical_cap,
        "learned_cap": result.learned_cap,
        "reasoning": result.reasoning,
        "launch_interval_seconds": result.launch_interval_seconds,
        # Packets that should wait: seconds after the run's first launch, by packet id (the rest need not).
        "launch_offsets": {p: s for p, s in zip(result.order, result.launch_offsets, strict=True) if s},
        "oversize_packets": result.oversize,
        "forecast": forecast_view(result.forecast),
    }
