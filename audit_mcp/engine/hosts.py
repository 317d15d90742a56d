"""Host capabilities: tool arguments, then earlier answers, then the session config, then what the
MCP client announced about itself, then a safe default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audit_mcp.core.config_sections import HostConfig
from audit_mcp.core.models import HostCapabilities

DEFAULT_MAX_ACTIVE = 4
_FIELDS = (
    "can_dispatch_subagents",
    "can_restrict_subagent_tools",
    "can_select_subagent_model",
    "max_active_subagents",
    "dispatch_mode",
    "model",
)
DISPATCH_MODES = ("rolling", "whole_wave")

# Kept with the answers: the client that gave them, and the lenses an audit was started with (--lenses).
_REMEMBERED = (*_FIELDS, "client_name", "lenses", "since", "analyzers")
# What an audit is started with, remembered for it and never carried to the next audit.
STARTED_WITH = ("lenses", "since", "analyzers")

# What well-known clients can do, by a substring of the clientInfo name they announce. Cursor waits for a
# whole batch of subagents before it starts the next (whole_wave); the others refill a slot as soon as a
# subagent finishes (rolling), as does ``audit-mcp run``.
KNOWN_CLIENTS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "claude-code",
        {
            "can_dispatch_subagents": True,
            "can_restrict_subagent_tools": True,
            "can_select_subagent_model": True,
            "max_active_subagents": 16,
            "dispatch_mode": "rolling",
        },
    ),
    (
        "claude code",
        {
            "can_dispatch_subagents": True,
            "can_restrict_subagent_tools": True,
            "can_select_subagent_model": True,
            "max_active_subagents": 16,
            "dispatch_mode": "rolling",
        },
    ),
    ("codex", {"can_dispatch_subagents": True, "max_active_subagents": 3, "dispatch_mode": "rolling"}),
    ("visual studio code", {"can_dispatch_subagents": True, "max_active_subagents": 4, "dispatch_mode": "rolling"}),
    ("vscode", {"can_dispatch_subagents": True, "max_active_subagents": 4, "dispatch_mode": "rolling"}),
    ("cursor", {"can_dispatch_subagents": True, "max_active_subagents": 4, "dispatch_mode": "whole_wave"}),
    ("audit-mcp-run", {"dispatch_mode": "rolling"}),
)


def client_profile(client_name: str | None) -> dict[str, Any]:
    if not client_name:
        return {}
    lowered = client_name.lower()
    return next((dict(profile) for key, profile in KNOWN_CLIENTS if key in lowered), {})


def resolve(
    arguments: Mapping[str, Any],
    remembered: Mapping[str, Any],
    config: HostConfig,
    client_name: str | None,
    wave_kind: str | None = None,
) -> HostCapabilities:
    """``wave_kind`` is the older ``[scheduler] wave_kind`` (or ``AUDIT_MCP_WAVE_KIND``): the dispatch mode
    when neither the host nor ``[host] dispatch_mode`` says it."""
    layers = (
        ("tool arguments", {k: v for k, v in arguments.items() if v is not None}),
        ("an earlier next_step answer", {k: v for k, v in remembered.items() if k in _FIELDS and v is not None}),
        ("session config [host]", {k: v for k, v in config.model_dump().items() if v is not None}),
        ("session config [scheduler] wave_kind", {"dispatch_mode": wave_kind} if wave_kind else {}),
        (f"client '{client_name}'", client_profile(client_name)),
    )
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for field in _FIELDS:
        for source, layer in layers:
            if field in layer:
                values[field] = layer[field]
                sources[field] = source
                break
        else:
            sources[field] = "default"
    values.setdefault("can_restrict_subagent_tools", False)
    values.setdefault("can_select_subagent_model", False)
    values.setdefault("max_active_subagents", DEFAULT_MAX_ACTIVE)
    values.setdefault("dispatch_mode", "rolling")
    return HostCapabilities(**values, client_name=client_name, sources=sources)


def remember(arguments: Mapping[str, Any], remembered: Mapping[str, Any]) -> dict[str, Any]:
    """Merge this call's explicit answers (and the client that gave them) into what earlier calls said."""
    merged = dict(remembered)
    merged.update({k: v for k, v in arguments.items() if k in _REMEMBERED and v is not None})
    return merged


def remembered_client(remembered: Mapping[str, Any]) -> str | None:
    """The client of the latest next_step, whose profile and dispatch mode the next run is planned for."""
    name = remembered.get("client_name")
    return name if isinstance(name, str) else None
