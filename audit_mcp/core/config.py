"""The session config: which lenses apply where, what is in scope, run limits.

It lives at ``<root>/.audit-mcp.toml`` (override with ``--config`` or the
``AUDIT_MCP_CONFIG`` environment variable) and is optional: every key has a
default. See the README's "Configuration" section for the format. The
``AUDIT_MCP_*`` variables of ``ENV_OVERRIDES`` win over the file, and are
validated by the same model, so a value the file may not hold is refused
from the environment too.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from audit_mcp.core.errors import ConfigError

CONFIG_FILENAME = ".audit-mcp.toml"
DEFAULT_LENSES = (
    "security",
    "correctness",
    "error_handling",
    "concurrency",
    "performance",
    "maintainability",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LensRule(_Strict):
    """Lenses for the files that match ``glob`` (the last matching rule wins)."""

    glob: str
    lenses: list[str]


class HostConfig(_Strict):
    """What the host can do, when neither the tool call nor the client says so."""

    can_dispatch_subagents: bool | None = None
    can_restrict_subagent_tools: bool | None = None
    can_select_subagent_model: bool | None = None
    max_active_subagents: Annotated[int, Field(ge=1, le=64)] | None = None
    model: str | None = None


class ModelConfig(_Strict):
    """Limits of the reviewing model, overriding the built-in table."""

    context_tokens: Annotated[int, Field(ge=8_000)] | None = None
    output_tokens: Annotated[int, Field(ge=1_000)] | None = None
    requests_per_minute: Annotated[int, Field(ge=1)] | None = None
    input_tokens_per_minute: Annotated[int, Field(ge=1_000)] | None = None
    output_tokens_per_minute: Annotated[int, Field(ge=100)] | None = None


class SchedulerConfig(_Strict):
    """How the wave scheduler learns and what it assumes about the host."""

    half_life_hours: Annotated[float, Field(gt=0, le=24 * 365)] = 24.0
    wave_kind: Literal["rolling", "whole_wave"] | None = None
    probe: Literal["never", "auto", "force"] = "never"


class AnalyzersConfig(_Strict):
    """Static analyzers whose alerts become leads for the reviewers."""

    sarif: list[str] = Field(default_factory=list, description="SARIF files, relative to the repository root.")
    run: list[Literal["bandit", "ruff"]] = Field(
        default_factory=list, description="Analyzers to run over the repository when they are installed."
    )


class SessionConfig(_Strict):
    """Everything a user can set for the audit of one repository."""

    lenses: list[str] = Field(default_factory=lambda: list(DEFAULT_LENSES))
    lens_rules: list[LensRule] = Field(default_factory=list)
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    review_docs: bool = False
    max_file_bytes: Annotated[int, Field(ge=1_000)] = 1_500_000
    chunk_threshold_lines: Annotated[int, Field(ge=200)] = 2_500
    chunk_lines: Annotated[int, Field(ge=100)] = 1_500
    max_packet_tokens: Annotated[int, Field(ge=4_000)] = 60_000
    max_runs: Annotated[int, Field(ge=1)] = 30
    max_attempts: Annotated[int, Field(ge=1, le=10)] = 3
    lease_seconds: Annotated[int, Field(ge=60)] = 7_200
    max_packets_per_run: Annotated[int, Field(ge=1, le=2_000)] = 200
    since: str | None = None
    carry_forward: bool = True
    host: HostConfig = Field(default_factory=HostConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    analyzers: AnalyzersConfig = Field(default_factory=AnalyzersConfig)


# Each variable overrides one setting: (section, key) of SessionConfig.
ENV_OVERRIDES: dict[str, tuple[str, str]] = {
    "AUDIT_MCP_CONTEXT_TOKENS": ("model", "context_tokens"),
    "AUDIT_MCP_OUTPUT_TOKENS": ("model", "output_tokens"),
    "AUDIT_MCP_RPM": ("model", "requests_per_minute"),
    "AUDIT_MCP_ITPM": ("model", "input_tokens_per_minute"),
    "AUDIT_MCP_OTPM": ("model", "output_tokens_per_minute"),
    "AUDIT_MCP_HALF_LIFE_HOURS": ("scheduler", "half_life_hours"),
    "AUDIT_MCP_WAVE_KIND": ("scheduler", "wave_kind"),
    "AUDIT_MCP_PROBE": ("scheduler", "probe"),
}


def env_overrides(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The override variables that are set (blank ones count as unset), with their values."""
    env = os.environ if environ is None else environ
    return {name: value.strip() for name in ENV_OVERRIDES if (value := env.get(name, "")).strip()}


def with_env(config: SessionConfig, environ: Mapping[str, str] | None = None) -> SessionConfig:
    """``config`` with the environment's overrides applied, validated exactly as the file's values are."""
    overrides = env_overrides(environ)
    if not overrides:
        return config
    data = config.model_dump()
    for name, value in overrides.items():
        section, key = ENV_OVERRIDES[name]
        data[section][key] = value
    try:
        return SessionConfig.model_validate(data)
    except ValidationError as exc:
        by_place = {place: name for name, place in ENV_OVERRIDES.items()}
        problems = []
        for err in exc.errors():
            place = tuple(str(part) for part in err["loc"])
            var = by_place.get((place[0], place[1])) if len(place) == 2 else None
            where = f"{var}={overrides[var]!r} ([{place[0]}] {place[1]})" if var else ".".join(place)
            problems.append(f"{where}: {err['msg']}")
        raise ConfigError(
            f"invalid environment override: {'; '.join(problems)}. Fix or unset the variable and call next_step again."
        ) from exc


def config_path_for(root: Path, explicit: Path | None = None) -> Path:
    if explicit is not None:
        return explicit
    env = os.environ.get("AUDIT_MCP_CONFIG")
    if env:
        return Path(env)
    return root / CONFIG_FILENAME


def load_config(root: Path, explicit: Path | None = None) -> SessionConfig:
    """Read the session config, with the environment's overrides; a missing file means every default."""
    path = config_path_for(root, explicit)
    if not path.exists():
        if explicit is not None:
            raise ConfigError(f"config file {path} does not exist; create it or drop --config")
        return with_env(SessionConfig())
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}. Fix the file and call next_step again.") from exc
    try:
        config = SessionConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"{path} has invalid settings: {problems}. Fix them and call next_step again.") from exc
    return with_env(config)
