"""A run in flight: learning from each packet's usage and each reported failure as they arrive, and the run's
live schedule (the width, cooldown and start times for the packets not launched yet) from what was learned.

What a run was scheduled for (the learned state's key, the model, the host's cap and dispatch mode) is
recorded at dispatch beside the run, so none of this reads the run's whole plan. ``checked_failures`` checks
the failures a host reports (between waves to plan_status, at the end to merge_and_ingest) before any is
recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.errors import InputError
from audit_mcp.core.models import HostCapabilities
from audit_mcp.core.text import id_problem
from audit_mcp.engine.checks import MAX_FAILURE_TEXT_CHARS, clean_text, value_problems
from audit_mcp.engine.dispatch import TIER_ORDER
from audit_mcp.scheduling.learning import Context, learn_failure, learn_usage
from audit_mcp.scheduling.limits import ResolvedLimits, resolve_limits
from audit_mcp.scheduling.live import Live, replan
from audit_mcp.scheduling.pacing import Pacing, with_observed
from audit_mcp.scheduling.profile import Learned
from audit_mcp.scheduling.scheduler import PacketLoad
from audit_mcp.store.tx import Tx
from audit_mcp.usecases.workspace import Workspace


@dataclass(frozen=True)
class RunContext:
    key: str  # the learned state's key (provider/model)
    provider: str
    model: str | None
    host_cap: int
    mode: str  # rolling or whole_wave: how the host was told to dispatch
    max_packet_tokens: int
    half_life: timedelta
    units: dict[str, int] = field(default_factory=dict)  # files or chunks per packet

    def as_dict(self) -> dict[str, Any]:
        return {
            "state_key": self.key,
            "provider": self.provider,
            "model": self.model,
            "host_cap": self.host_cap,
            "dispatch_mode": self.mode,
            "max_packet_tokens": self.max_packet_tokens,
            "half_life_hours": self.half_life.total_seconds() / 3600,
        }


def context_for(
    key: str, limits: ResolvedLimits, caps: HostCapabilities, settings: Pacing, config: SessionConfig
) -> RunContext:
    return RunContext(
        key,
        limits.provider,
        caps.model,
        caps.max_active_subagents,
        settings.wave_kind,
        config.max_packet_tokens,
        settings.half_life,
    )


def _context(tx: Tx, run_id: str) -> RunContext | None:
    stored = tx.run_context(run_id)
    if stored is None:
        return None
    return RunContext(
        str(stored["state_key"]),
        str(stored["provider"]),
        stored.get("model"),
        int(stored["host_cap"]),
        str(stored["dispatch_mode"]),
        int(stored["max_packet_tokens"]),
        timedelta(hours=float(stored["half_life_hours"])),
        {str(k): int(v) for k, v in (stored.get("units") or {}).items()},
    )


@dataclass(frozen=True)
class InFlight:
    run_id: str
    context: RunContext
    limits: ResolvedLimits  # with the limits observed so far
    learned: Learned
    loads: list[PacketLoad]
    submitted: set[str]
    reported: dict[str, str]  # failures reported before the merge, by packet id
    dispatched_at: datetime | None = None  # when the run was dispatched: its launch offsets count from about then
    teacher: str = ""  # whose word its evidence is (``scheduling.claims``): the audit's repository, digested
    base: ResolvedLimits | None = None  # the limits as configured or tabled, without anything learned

    def live(self, launched: Collection[str], now: datetime) -> Live:
        """The schedule now for the packets neither launched, submitted nor reported failed."""
        done = self.submitted | set(self.reported) | set(launched)
        waiting = {p.packet_id for p in self.loads} - done
        # Where the host said what it launched, the packets still waiting are paced from where the run stands.
        known = bool(launched) and self.dispatched_at is not None
        elapsed = max(0.0, (now - self.dispatched_at).total_seconds()) if known and self.dispatched_at else None
        return replan(
            self.limits,
            self.learned,
            self.context.host_cap,
            self.context.mode,
            self.loads,
            waiting,
            now,
            half_life=self.context.half_life,
            max_packet_tokens=self.context.max_packet_tokens,
            elapsed=elapsed,
            running=len(set(launched) - self.submitted - set(self.reported)),
        )

    def learning(self, now: datetime) -> Context:
        """What the plan is now: the evidence arriving is judged against it."""
        mean = sum(p.estimated_tokens for p in self.loads) / len(self.loads) if self.loads else 0.0
        width = self.live((), now).capacity
        return Context(
            self.limits,
            self.context.host_cap,
            self.context.mode,
            mean,
            width,
            self.context.half_life,
            teacher=self.teacher,
            base=self.base,
        )


def in_flight(ws: Workspace, config: SessionConfig, tx: Tx, run_id: str) -> InFlight | None:
    """The run as it stands, or None for a run dispatched without a recorded context (nothing is learned
    before its merge then)."""
    context = _context(tx, run_id)
    if context is None:
        return None
    learned = ws.learned.get(context.key)
    base = resolve_limits(context.model, context.provider, config.model)
    limits = with_observed(base, learned)
    loads = [
        PacketLoad(p.packet_id, p.estimated_tokens, TIER_ORDER.get(p.model_tier, 1), context.units.get(p.packet_id, 1))
        for p in tx.packets(run_id)
    ]
    submitted, reported = tx.submitted_packet_ids(run_id), tx.reported_failures(run_id)
    run = tx.run(run_id, plan=False)
    dispatched = datetime.fromisoformat(run.created_at.replace("Z", "+00:00")) if run is not None else None
    return InFlight(run_id, context, limits, learned, loads, submitted, reported, dispatched, ws.teacher, base)


def learn_from_usage(ws: Workspace, run_id: str, estimated_tokens: int, usage: Mapping[str, Any]) -> None:
    """Fold one accepted submission's ``usage`` into the learned state at once."""
    with ws.store.read() as tx:
        flight = in_flight(ws, ws.config(), tx, run_id)
    if flight is not None:
        learn_measured_usage(ws, flight, estimated_tokens, usage)


def learn_measured_usage(ws: Workspace, flight: InFlight, estimated_tokens: int, usage: Mapping[str, Any]) -> None:
    """Fold one packet's usage (submitted, or printed by its worker) into the run's learned state."""
    numbers = {k: float(v) for k, v in usage.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    if not numbers:
        return
    now = ws.clock()
    context = flight.learning(now)
    ws.learned.update(
        flight.context.key, lambda state: learn_usage(state, numbers, estimated_tokens, now, context), now
    )


def learn_from_failures(ws: Workspace, flight: InFlight, texts: Collection[str]) -> None:
    """Fold failures the host just reported into the learned state."""
    if not texts:
        return
    now = ws.clock()
    context = flight.learning(now)

    def change(state: Learned) -> Learned:
        for text in texts:
            state = learn_failure(state, text, now, context)
        return state

    ws.learned.update(flight.context.key, change, now)


_FAILURE_MESSAGES: dict[str, Callable[[Any], str]] = {
    "packet_id": lambda v: id_problem("packet_id", v) or "packet_id must be the packet's id",
    "error": lambda v: f"'error' must be the error text the host saw, not {type(v).__name__}",
}


def checked_failures(failures: Sequence[Mapping[str, Any]] | None) -> dict[str, str]:
    """Packet id -> the error text the host saw, for every well-formed failure; ``InputError`` otherwise."""
    if failures is not None and not isinstance(failures, list | tuple):
        raise InputError([("/failures", "must be an array of {packet_id, error} objects")], "Nothing changed.")
    items = list(failures or [])
    if not items:  # the usual call between waves: nothing failed, and the input models are not loaded
        return {}
    # The input models, loaded for a list to check: a plan_status with nothing failed needs none of them.
    from audit_mcp.engine.inputs import Failure, shape_problems

    problems = value_problems(items, "/failures")[0]
    if problems:
        raise InputError(problems, "Nothing changed. Send plain JSON (UTF-8 text, finite numbers) and merge again.")
    reported: dict[str, str] = {}
    for i, item in enumerate(items):
        loc = f"/failures/{i}"
        if not isinstance(item, Mapping):
            problems.append((loc, "each failure must be an object {packet_id, error} (the text the host saw)"))
            continue
        shape = shape_problems(Failure, item, ("failures", i), _FAILURE_MESSAGES)
        if shape:
            problems += [(where, message) for _, where, message in shape]
            continue
        packet_id = item.get("packet_id")
        if problem := id_problem("packet_id", packet_id):
            problems.append((f"{loc}/packet_id", problem))
            continue
        text = next((item[k] for k in ("error", "error_text", "message") if item.get(k) is not None), "")
        if not isinstance(text, str):
            problems.append((f"{loc}/error", f"'error' must be the error text the host saw, not {type(text).__name__}"))
            continue
        reported[str(packet_id)] = clean_text(text[:MAX_FAILURE_TEXT_CHARS]).strip() or "failed without an error text"
    if problems:
        raise InputError(problems, "Nothing changed. Fix the failures list and call merge_and_ingest again.")
    return reported
