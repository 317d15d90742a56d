"""Between the use cases and the pure scheduler: settings, what a merged run taught, and the views.

Knobs (docs/scheduling.md): ``[scheduler]`` in the session config
(``half_life_hours``, ``wave_kind``, ``probe``); the environment variables
``AUDIT_MCP_HALF_LIFE_HOURS``, ``AUDIT_MCP_WAVE_KIND``, ``AUDIT_MCP_PROBE`` win
over the file, and ``core.config`` has already applied and validated them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from audit_mcp.core.config_sections import SchedulerConfig
from audit_mcp.scheduling.learning import RunOutcome
from audit_mcp.scheduling.profile import with_observed
from audit_mcp.scheduling.ratelimits import parse_error_text
from audit_mcp.scheduling.scheduler import Forecast, Schedule


@dataclass(frozen=True)
class Pacing:
    half_life: timedelta
    wave_kind: str
    probe: str


def iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def pacing_settings(config: SchedulerConfig, dispatch_mode: str) -> Pacing:
    """The scheduler's settings: the session config (with the environment's overrides) and how the host
    dispatches (``HostCapabilities.dispatch_mode``, resolved with the host's other capabilities)."""
    return Pacing(timedelta(hours=config.half_life_hours), dispatch_mode, config.probe)


def run_outcome(
    *,
    launched: int,
    wave_size: int,
    succeeded: int,
    reported: Mapping[str, str],
    usage: Sequence[Mapping[str, Any]],
    now: datetime,
    learned_already: Collection[str] = (),
    printed: Mapping[str, str] | None = None,
) -> RunOutcome:
    """What a merged run says: its rate-limited failures and hard stops, the failures not learned yet
    (``learned_already`` names the packets whose failure was learned as it was reported), and the calls
    and rate-limited calls its packets' usage reported.

    ``printed`` is what successful workers printed about rate limits, by packet: read as error text is
    (quoted limits, hard stops), while those packets' success stands.
    """
    signals = {packet: parse_error_text(text, now) for packet, text in reported.items()}
    hard = next((s.hard_stop for s in signals.values() if s.hard_stop), None)
    observed: dict[str, int] = {}
    for packet_id, text in (printed or {}).items():
        signal = parse_error_text(text, now)
        observed.update(signal.limits)
        if signal.hard_stop and hard is None:
            hard = f"{signal.hard_stop} (printed by the worker of packet {packet_id}, whose work is kept)"
    return RunOutcome(
        launched=launched,
        wave_size=wave_size,
        succeeded=succeeded,
        rate_limited=sum(1 for s in signals.values() if s.rate_limited),
        limited_texts=[text for packet, text in reported.items() if signals[packet].rate_limited],
        failures=[text for packet, text in reported.items() if packet not in learned_already],
        absorbed=int(sum(float(u.get("rate_limited_calls") or 0) for u in usage if u)),
        calls=int(sum(float(u.get("api_calls") or 0) for u in usage if u)),
        observed_limits=observed,
        hard_stop=hard,
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
        "paced_by": forecast.paced_by,
        "pace": forecast.pace,
        "limits": forecast.limits,  # each limit's value, where it came from, and whether it binds
    }


def _minutes(seconds: int) -> str:
    return f"{max(1, round(seconds / 60))} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def schedule_view(result: Schedule, key: str) -> dict[str, Any]:
    """The schedule as it goes into a dispatch plan and ``quota_status``."""
    return {
        "state_key": key,
        "wave_kind": result.dispatch_mode,
        "dispatch_mode": result.dispatch_mode,
        "slow_start": result.slow_start,
        "physical_cap": result.physical_cap,
        # Runs at once on average: need not be whole (2.5: three slots, the last paced; or waves of 3 and 2).
        "capacity": round(result.capacity or result.wave_size, 2),
        "learned_cap": result.learned_cap,
        "reasoning": result.reasoning,
        "launch_interval_seconds": result.launch_interval_seconds,
        # Packets that should wait: seconds after the run's first launch, by packet id (the rest need not).
        "launch_offsets": {p: s for p, s in zip(result.order, result.launch_offsets, strict=True) if s},
        "oversize_packets": result.oversize,
        "forecast": forecast_view(result.forecast),
    }


# Re-exported: the use cases and the benchmark read observed limits through here.
__all__ = ["Pacing", "forecast_view", "iso", "pacing_settings", "run_outcome", "schedule_view", "with_observed"]
