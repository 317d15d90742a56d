"""The model's limits, the scheduler's settings, cooldowns, and learning from a merged run, for the use cases."""

from __future__ import annotations

from datetime import datetime

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.models import HostCapabilities
from audit_mcp.scheduling.failures import cooldown_until
from audit_mcp.scheduling.learned import state_key
from audit_mcp.scheduling.learning import Context, RunOutcome, learn_run
from audit_mcp.scheduling.limits import ResolvedLimits, resolve_limits
from audit_mcp.scheduling.pacing import Pacing, pacing_settings, with_observed
from audit_mcp.scheduling.profile import Learned, lapsed
from audit_mcp.store.tx import Tx
from audit_mcp.usecases.workspace import Workspace, iso


def pacing(
    ws: Workspace, config: SessionConfig, caps: HostCapabilities, provider: str | None = None
) -> tuple[ResolvedLimits, Learned, str, Pacing]:
    """Limits (with any seen in real headers), learned state and its key, and the scheduler's settings."""
    settings = pacing_settings(config.scheduler, caps.dispatch_mode)
    base = resolve_limits(caps.model, provider, config.model)
    key = state_key(base.provider, base.model, ws.teacher)
    learned = lapsed(ws.learned.get(key), ws.clock(), settings.half_life)
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


def learn_from_run(ws: Workspace, key: str, taught: RunOutcome, context: Context) -> None:
    """Fold what a merged run says (that its packets' usage and reported failures did not) into the learned
    state of the model it was scheduled for."""
    now = ws.clock()
    ws.learned.update(key, lambda state: learn_run(state, taught, now, context), now)


def active_cooldown(ws: Workspace) -> str | None:
    """The end of a rate-limit cooldown still in force for the current audit (UTC), if any."""
    with ws.store_if_any() as tx:
        audit = tx.current_audit() if tx is not None else None
        return cooldown(ws, tx, audit.audit_id) if tx is not None and audit is not None else None
