"""The model's limits, the scheduler's settings, cooldowns, and learning from a merged run, for the use cases."""

from __future__ import annotations

from datetime import datetime, timedelta

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.models import HostCapabilities
from audit_mcp.scheduling.failures import cooldown_until
from audit_mcp.scheduling.learned import state_key
from audit_mcp.scheduling.learning import RunOutcome, learn
from audit_mcp.scheduling.limits import ResolvedLimits, resolve_limits
from audit_mcp.scheduling.pacing import Pacing, pacing_settings, with_observed
from audit_mcp.scheduling.profile import Learned
from audit_mcp.store.records import RunRow
from audit_mcp.store.tx import Tx
from audit_mcp.usecases.workspace import Workspace, iso


def pacing(
    ws: Workspace, config: SessionConfig, caps: HostCapabilities, provider: str | None = None
) -> tuple[ResolvedLimits, Learned, str, Pacing]:
    """Limits (with any seen in real headers), learned state and its key, and the scheduler's settings."""
    settings = pacing_settings(config.scheduler, caps.client_name)
    base = resolve_limits(caps.model, provider, config.model)
    key = state_key(base.provider, base.model)
    learned = ws.learned.get(key)
    return with_observed(base, learned), learned, key, settings


def cooldown(ws: Workspace, tx: Tx, audit_id: int) -> str | None:
    """The end of the latest rate-limit cooldown, when it is still in the future."""
    latest = None
    for failure in tx.failures(audit_id):
        if failure["kind"] != "rate_limited":
            continue
        at = datetime.fromisoformat(failure["at"].replace("Z", "+00:00"))
        until = cooldown_until(failure["detail"], at)
        latest = until if latest is None or until > latest else latest
    if latest is None or latest <= ws.clock():
        return None
    return iso(latest)


def learn_from_run(ws: Workspace, run: RunRow, taught: RunOutcome, half_life: timedelta) -> None:
    """Fold a merged run's outcome into the learned state of the model it was scheduled for."""
    planned = run.plan.get("schedule") or {}
    key = planned.get("state_key")
    if not key:
        return
    prior = float(planned.get("physical_cap") or run.wave_size or 1)
    now = ws.clock()
    ws.learned.update(key, lambda state: learn(state, taught, now, prior, half_life), now)
