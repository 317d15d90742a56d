"""Model limits with their source and confidence, and the wave shape they allow.

Confidence: built-in defaults and the known-model table are ``low``; the
session config and environment overrides are ``medium``; values read from a
provider's real rate-limit headers are ``high``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from audit_mcp.core.config import ENV_OVERRIDES, env_overrides
from audit_mcp.core.config_sections import ModelConfig

# Context window and output tokens by model-name prefix (longest prefix wins).
_KNOWN_MODELS: dict[str, tuple[int, int]] = {
    "claude-opus-4-6": (1_000_000, 128_000),
    "claude-sonnet-4-6": (1_000_000, 128_000),
    "claude-opus-4-7": (1_000_000, 128_000),
    "claude-sonnet-4-7": (1_000_000, 128_000),
    "claude-opus-5": (1_000_000, 128_000),
    "claude-sonnet-5": (1_000_000, 128_000),
    "claude-haiku-4-5": (200_000, 64_000),
    "claude": (200_000, 64_000),
    "gpt-5.5": (1_050_000, 128_000),
    "gpt-5": (400_000, 128_000),
    "gpt-4.1": (1_000_000, 32_000),
    "o3": (200_000, 100_000),
    "o4": (200_000, 100_000),
    "gemini-2.5": (1_000_000, 64_000),
}
_DEFAULTS = {
    "context_tokens": 128_000,
    "output_tokens": 16_000,
    "requests_per_minute": 50,
    "input_tokens_per_minute": 30_000,
    "output_tokens_per_minute": 8_000,
}
OUTPUT_RESERVE_TOKENS = 16_000
# Claude Code drops tool calls past about 20 in one message, so no wave is wider.
MAX_WAVE_WIDTH = 16


@dataclass(frozen=True)
class Limit:
    value: int
    source: str
    confidence: str


@dataclass(frozen=True)
class ResolvedLimits:
    provider: str
    model: str
    limits: dict[str, Limit]

    def value(self, name: str) -> int:
        return self.limits[name].value

    @property
    def packet_budget(self) -> int:
        """Tokens a packet may take: the context minus what the reviewer's work and answer need."""
        context = self.value("context_tokens")
        return max(8_000, context - max(OUTPUT_RESERVE_TOKENS, context // 4))


def built_in(key: str) -> int:
    """A limit's built-in default (the lowest tier the table knows): what no repository's word lowers."""
    return _DEFAULTS[key]


def provider_for(model: str) -> str:
    name = model.lower()
    if name.startswith("claude"):
        return "anthropic"
    if name.startswith(("gpt", "o1", "o3", "o4", "codex")):
        return "openai"
    if name.startswith("gemini"):
        return "google"
    return "unknown"


def resolve_limits(model: str | None, provider: str | None, config: ModelConfig) -> ResolvedLimits:
    """The limits of ``model``, key by key: the environment's overrides (validated by ``core.config``), then the
    model's own ``[model."<name>"]`` table, then ``[model]``, then the known-model table, then the defaults."""
    from_env = {ENV_OVERRIDES[name][1]: name for name in env_overrides() if ENV_OVERRIDES[name][0] == "model"}
    name = (model or "unknown").strip() or "unknown"
    limits = {key: Limit(value, "built-in default", "low") for key, value in _DEFAULTS.items()}
    prefix = max((p for p in _KNOWN_MODELS if name.lower().startswith(p)), key=len, default=None)
    if prefix is not None:
        context, output = _KNOWN_MODELS[prefix]
        limits["context_tokens"] = Limit(context, f"known-model table ({prefix})", "low")
        limits["output_tokens"] = Limit(output, f"known-model table ({prefix})", "low")
    table, own = config.for_model(name)
    for key in _DEFAULTS:
        if key in from_env:  # the environment wins over every table (core.config put it in [model])
            limits[key] = Limit(int(getattr(config, key)), f"environment {from_env[key]}", "medium")
        elif own is not None and getattr(own, key) is not None:
            limits[key] = Limit(int(getattr(own, key)), f'session config [model."{table}"]', "medium")
        elif getattr(config, key) is not None:
            limits[key] = Limit(int(getattr(config, key)), "session config [model]", "medium")
    return ResolvedLimits(provider or provider_for(name), name, limits)


def waves_for(n_packets: int, width: float, mode: str) -> list[int]:
    """How ``n_packets`` go out at ``width`` (a capacity: it need not be whole): whole waves balanced (a wave
    waits for its slowest member, so 25 at 16 go as 13 + 12; at 2.5, waves of 3 and 2 alternate), rolling ones
    full at the slots the width needs (a rolling host keeps them running and refills a slot as soon as it
    frees, so 20 at 16 run 16 at once and the last 4 as slots free; launch pacing holds a width of 2.5 to
    2.5 on average in 3 slots)."""
    if mode == "whole_wave":
        return composed_waves(n_packets, width)
    slots = max(1, min(math.ceil(width - 1e-9), MAX_WAVE_WIDTH))
    full, rest = divmod(max(0, n_packets), slots)
    return [slots] * full + ([rest] if rest else [])


def composed_waves(n_packets: int, capacity: float) -> list[int]:
    """Whole waves of ``n_packets`` averaging at most ``capacity``, as even as possible. A whole capacity
    gives balanced waves (``balanced_waves``); between two whole numbers the waves are of both sizes, the
    larger spread evenly among the smaller (2.5: 3, 2, 3, 2, ...) so that no run of larger waves drains a
    bucket the smaller ones would have let refill."""
    capacity = float(max(1.0, min(capacity, float(MAX_WAVE_WIDTH))))
    if n_packets <= 0 or capacity.is_integer():
        return balanced_waves(n_packets, int(capacity))
    waves = math.ceil(n_packets / capacity - 1e-9)
    base, extra = divmod(n_packets, waves)
    return [base + (math.ceil((i + 1) * extra / waves) > math.ceil(i * extra / waves)) for i in range(waves)]


def balanced_waves(n_packets: int, cap: int) -> list[int]:
    """Wave sizes for ``n_packets`` at most ``cap`` wide, as even as possible (25, 16 → 13 + 12)."""
    if n_packets <= 0:
        return []
    cap = max(1, min(cap, MAX_WAVE_WIDTH))
    waves = math.ceil(n_packets / cap)
    base, extra = divmod(n_packets, waves)
    return [base + 1 if i < extra else base for i in range(waves)]
