"""The tables of the session config (``[host]``, ``[model]``, ``[scheduler]``, ``[analyzers]``, ``[shared]``) and
the lens rules; ``config.SessionConfig`` holds them with the top-level keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# A repository's config is untrusted: lists and patterns are bounded too.
_MAX_PATTERNS = 1_000
_Pattern = Annotated[str, Field(min_length=1, max_length=1_000)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LensRule(_Strict):
    """Lenses for the files that match ``glob`` (the last matching rule wins)."""

    glob: _Pattern = Field(description="A gitignore-style pattern of repo-relative paths, such as 'tests/**'.")
    lenses: Annotated[list[str], Field(max_length=64)] = Field(
        description="The lenses that review the files matching glob, whatever their kind (an empty list: none)."
    )


class HostConfig(_Strict):
    """What the host can do, when neither the tool call nor the client says so."""

    can_dispatch_subagents: bool | None = Field(
        default=None, description="Whether the host can launch subagents (parallel workers with their own context)."
    )
    can_restrict_subagent_tools: bool | None = Field(
        default=None, description="Whether the host can limit which tools a subagent may use."
    )
    can_select_subagent_model: bool | None = Field(
        default=None, description="Whether the host can choose the model of each subagent."
    )
    max_active_subagents: Annotated[int, Field(ge=1, le=64)] | None = Field(
        default=None, description="How many subagents the host runs at once at most (waves never exceed it, nor 16)."
    )
    dispatch_mode: Literal["rolling", "whole_wave"] | None = Field(
        default=None,
        description="rolling: the host refills a slot as soon as a subagent finishes; whole_wave: it waits for "
        "a whole wave. Unset: what the host says, else what the client is known to do, else rolling.",
    )
    model: str | None = Field(
        default=None, description="The model the host's subagents run (e.g. claude-sonnet-4-6): its limits apply."
    )


class ModelLimits(_Strict):
    """Limits of a reviewing model, overriding the built-in table."""

    context_tokens: Annotated[int, Field(ge=8_000)] | None = Field(
        default=None, description="The model's context window, in tokens: packets are sized to fit it."
    )
    output_tokens: Annotated[int, Field(ge=1_000)] | None = Field(
        default=None, description="The most tokens one answer of the model may hold."
    )
    requests_per_minute: Annotated[int, Field(ge=1)] | None = Field(
        default=None, description="Requests per minute the account allows (a ceiling: obeyed, never raised)."
    )
    input_tokens_per_minute: Annotated[int, Field(ge=1_000)] | None = Field(
        default=None, description="Input tokens per minute the account allows (a ceiling: obeyed, never raised)."
    )
    output_tokens_per_minute: Annotated[int, Field(ge=100)] | None = Field(
        default=None, description="Output tokens per minute the account allows (a ceiling: obeyed, never raised)."
    )


LIMIT_KEYS = tuple(ModelLimits.model_fields)
_MAX_MODEL_TABLES = 200


class ModelConfig(ModelLimits):
    """``[model]``: limits for every model; ``[model."<name>"]``: limits for the models named so (the exact
    name, else the longest table name the model's name starts with), over ``[model]`` key by key."""

    models: dict[Annotated[str, Field(min_length=1, max_length=200)], ModelLimits] = Field(
        default_factory=dict,
        max_length=_MAX_MODEL_TABLES,
        description="One model's limits, key by key over [model]: the table named exactly as the model, else the "
        'longest name the model\'s own starts with (quote names with dots: [model."gpt-5.5"]).',
    )

    @model_validator(mode="before")
    @classmethod
    def _split_tables(cls, data: Any) -> Any:
        """The TOML shape (tables beside the keys) into ``models``; a key that is neither is named clearly."""
        if not isinstance(data, Mapping) or "models" in data:
            return data
        flat = {k: v for k, v in data.items() if not isinstance(v, Mapping)}
        unknown = [k for k in flat if k not in LIMIT_KEYS]
        if unknown:
            raise ValueError(f"[model] {unknown[0]}: {_NOT_A_LIMIT}")
        return {**flat, "models": {k: v for k, v in data.items() if isinstance(v, Mapping)}}

    def for_model(self, name: str) -> tuple[str | None, ModelLimits | None]:
        """The table that applies to ``name`` (exact, else the longest prefix, case-insensitive), if any."""
        lowered = name.lower()
        exact = next((k for k in self.models if k.lower() == lowered), None)
        chosen = exact or max((k for k in self.models if lowered.startswith(k.lower())), key=len, default=None)
        return chosen, (self.models[chosen] if chosen is not None else None)

    def as_table(self) -> dict[str, Any]:
        """The TOML shape again: ``[model]`` keys with each model's table beside them."""
        flat = {k: getattr(self, k) for k in LIMIT_KEYS}
        return {**flat, **{name: limits.model_dump() for name, limits in self.models.items()}}


_NOT_A_LIMIT = f'not a limit; a model\'s table takes {", ".join(LIMIT_KEYS)}, and [model."<name>"] tables'


class SchedulerConfig(_Strict):
    """How the wave scheduler learns and what it assumes about the host."""

    half_life_hours: Annotated[float, Field(gt=0, le=24 * 365)] = Field(
        default=24.0,
        description="How fast what was learned from rate limits fades: a learned cap decays back toward the "
        "physical cap, and a borne-out guess lapses, with this half-life.",
    )
    wave_kind: Literal["rolling", "whole_wave"] | None = Field(
        default=None, description="The older spelling of [host] dispatch_mode, used when nothing else says."
    )
    probe: Literal["never", "auto", "force"] = Field(
        default="never",
        description="Ask the provider's models endpoint about the model before the first plan and learn the limits "
        "its rate-limit headers state: auto (only when ANTHROPIC_API_KEY or OPENAI_API_KEY is set), never, or "
        "force (refuse to start without them).",
    )


class AnalyzersConfig(_Strict):
    """Static analyzers whose alerts become leads for the reviewers."""

    sarif: Annotated[list[_Pattern], Field(max_length=_MAX_PATTERNS)] = Field(
        default_factory=list, description="SARIF files, relative to the repository root."
    )
    results: Annotated[list[_Pattern], Field(max_length=_MAX_PATTERNS)] = Field(
        default_factory=list,
        description="Analyzer output files (SARIF, `bandit -f json`, `semgrep --json`; told apart by their content), "
        "relative to the repository root.",
    )
    run: list[Literal["bandit", "ruff"]] = Field(
        default_factory=list, description="Analyzers to run over the repository when they are installed."
    )


class SharedConfig(_Strict):
    """How hosts sharing one audit through a PostgreSQL store hold their packets."""

    claim_lease_seconds: Annotated[int, Field(ge=2, le=30 * 86_400)] = Field(
        default=600,
        description="A host's claim on packets lapses this long after its last sign of life (a call, or a serving "
        "host's heartbeat every third of it); the packets then go to whichever host claims next.",
    )
    learned: bool = Field(
        default=False,
        description="Keep the learned rate-limit state in the shared store, so one host's 429 narrows every "
        "host's next wave (the limit belongs to the API key the hosts share).",
    )
