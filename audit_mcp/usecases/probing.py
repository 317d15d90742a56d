"""The provider probe before a headless run: what the provider says about its limits, learned before planning.

``never`` asks nothing. ``auto`` asks the provider's models endpoint when its API key is set, and skips
(saying why) otherwise. ``force`` asks and refuses the run when the answer gives no limit at all, so a run
that must start from the provider's own figures never starts on guesses. Limits read from the answer's
rate-limit headers go into the learned state of the model (``high`` confidence, the same as limits quoted
by a worker), so the first plan of the run already obeys them; the context window the models endpoint
states is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from audit_mcp.core.errors import ConfigError
from audit_mcp.scheduling.claims import observed
from audit_mcp.scheduling.learned import state_key
from audit_mcp.scheduling.limits import resolve_limits
from audit_mcp.scheduling.probe import probe
from audit_mcp.scheduling.profile import PROBE
from audit_mcp.usecases.workspace import Workspace

PROBE_MODES = ("auto", "never", "force")
# How ``probe`` and ``probe_before_run`` begin a note when they asked nothing.
_NOT_ASKED = ("provider probe off", "provider probe skipped", "no probe is known")


@dataclass(frozen=True)
class ProbeOutcome:
    mode: str
    note: str
    learned: dict[str, int] = field(default_factory=dict)
    """Limits from the provider's rate-limit headers, now in the learned state."""
    read: dict[str, int] = field(default_factory=dict)
    """Every value the probe read (the models endpoint's context and output tokens too)."""


def probe_before_run(ws: Workspace, model: str | None, mode: str | None, provider: str | None = None) -> ProbeOutcome:
    """Probe the provider about ``model`` (else the config's ``[host] model``) as ``mode`` says; ``None`` takes
    the session config's ``[scheduler] probe`` (or ``AUDIT_MCP_PROBE``)."""
    if mode is None:
        try:
            mode = ws.config().scheduler.probe
        except ConfigError:
            return ProbeOutcome("never", "")  # the next step blocks on the config, naming what to fix
        if mode == "never":
            return ProbeOutcome(mode, "")
    if mode not in PROBE_MODES:
        raise ConfigError(f"--quota-probe must be one of {', '.join(PROBE_MODES)}, not {mode!r}")
    if mode == "never":
        return ProbeOutcome(mode, "provider probe off (--quota-probe never)")
    config = ws.config()
    name = model or config.host.model
    if not name:
        if mode == "force":
            raise ConfigError(
                "--quota-probe force needs the workers' model to ask about: pass --host-model MODEL "
                "(or set [host] model in the session config)"
            )
        return ProbeOutcome(mode, "provider probe skipped: no model is known (pass --host-model MODEL)")
    limits = resolve_limits(name, provider, config.model)
    now = ws.clock()
    answer = probe(limits.provider, limits.model, mode, now, transport=ws.probe_transport)
    read = {key: limit.value for key, limit in answer.limits.items()}
    if mode == "force" and not read:
        raise ConfigError(
            f"--quota-probe force could not read any limit of {limits.model} from {limits.provider}: "
            f"{answer.note}. Set the provider's API key (ANTHROPIC_API_KEY or OPENAI_API_KEY) or name a model "
            "it serves, or run with --quota-probe auto to go on without it"
        )
    headers = {key: limit.value for key, limit in answer.limits.items() if limit.confidence == "high"}
    if headers:
        ws.learned.update(
            state_key(limits.provider, limits.model),
            lambda state: observed(state, {k: (v, (PROBE,)) for k, v in headers.items()}, now),
            now,
        )
    return ProbeOutcome(mode, f"{limits.provider}/{limits.model}: {answer.note}", headers, read)


def probe_block(outcome: ProbeOutcome, provider: str, model: str) -> dict[str, object]:
    """What ``quota`` says of the probe: its mode, what was asked, the values read and learned, or why not."""
    note = outcome.note.split(": ", 1)[1] if outcome.note.startswith(f"{provider}/") else outcome.note
    asked = bool(outcome.note) and not note.startswith(_NOT_ASKED)
    return {
        "mode": outcome.mode,
        "asked": f"{provider} models endpoint about {model}" if asked else None,
        "read": dict(outcome.read),
        "learned": dict(outcome.learned),
        "note": note or f"provider probe off (probe = {outcome.mode})",
    }
