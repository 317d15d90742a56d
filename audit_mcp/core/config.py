"""The session config: which lenses apply where, what is in scope, run limits.

It lives at ``<root>/.audit-mcp.toml`` (override with ``--config`` or the
``AUDIT_MCP_CONFIG`` environment variable) and is optional: every key has a
default. docs/configuration.md describes it, and docs/reference/config.md lists every key. The
``AUDIT_MCP_*`` variables of ``ENV_OVERRIDES`` win over the file, and are
validated by the same model, so a value the file may not hold is refused
from the environment too.

The repository's own ``.audit-mcp.toml`` is untrusted (it comes with the code
under audit): it must be a regular file inside the root, every path it names
must stay inside the root, and it cannot turn on the provider probe. A file the
user names (``--config``, ``AUDIT_MCP_CONFIG``) is trusted and may point
anywhere; its relative paths are taken from the root.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from audit_mcp.core.config_sections import (
    _MAX_PATTERNS,
    _NOT_A_LIMIT,
    AnalyzersConfig,
    HostConfig,
    LensRule,
    ModelConfig,
    ModelLimits,
    SchedulerConfig,
    SharedConfig,
    _Pattern,
    _Strict,
)
from audit_mcp.core.errors import ConfigError, PathError
from audit_mcp.core.fs import normalize_relpath, read_capped, read_confined, resolve_inside
from audit_mcp.core.prices import PRICE_KEYS, PricesConfig

CONFIG_FILENAME = ".audit-mcp.toml"
REPOSITORY_CONFIG = f"the repository's own {CONFIG_FILENAME}"  # how reasons name the untrusted config
MAX_CONFIG_BYTES = 1_000_000
DEFAULT_LENSES = (
    "security",
    "correctness",
    "error_handling",
    "concurrency",
    "performance",
    "maintainability",
)


class SessionConfig(_Strict):
    """Everything a user can set for the audit of one repository."""

    lenses: Annotated[list[str], Field(max_length=64)] = Field(
        default_factory=lambda: list(DEFAULT_LENSES),
        description="The audit's lenses, in order: each file is reviewed under those of them that read its kind "
        "(the lenses are security, correctness, error_handling, concurrency, performance, maintainability and "
        "tests).",
    )
    lens_rules: Annotated[list[LensRule], Field(max_length=_MAX_PATTERNS)] = Field(
        default_factory=list,
        description="Lenses for the files a glob matches, over the lenses and the file's kind (the last matching "
        "rule wins).",
    )
    include: Annotated[list[_Pattern], Field(max_length=_MAX_PATTERNS)] = Field(
        default_factory=list,
        description="Gitignore-style patterns of the files to audit; empty means every file. Files left out are "
        "named in the report.",
    )
    exclude: Annotated[list[_Pattern], Field(max_length=_MAX_PATTERNS)] = Field(
        default_factory=list,
        description="Gitignore-style patterns of files to leave out of the audit; each is named in the report.",
    )
    review_docs: bool = Field(default=False, description="Review Markdown, reStructuredText and text files too.")
    max_file_bytes: Annotated[int, Field(ge=1_000, le=100_000_000)] = Field(
        default=1_500_000, description="Files larger than this are skipped, and named in the report."
    )
    chunk_threshold_lines: Annotated[int, Field(ge=200, le=10_000_000)] = Field(
        default=2_500, description="Files longer than this many lines are split into chunks."
    )
    chunk_lines: Annotated[int, Field(ge=100, le=10_000_000)] = Field(
        default=1_500, description="Lines per chunk (fewer when the lines are long)."
    )
    max_packet_tokens: Annotated[int, Field(ge=4_000, le=10_000_000)] = Field(
        default=60_000,
        description="A packet's token budget; the model's context and rate limits may keep packets smaller.",
    )
    max_runs: Annotated[int, Field(ge=1, le=10_000)] = Field(
        default=30, description="Review runs before the audit stops with a blocker."
    )
    max_attempts: Annotated[int, Field(ge=1, le=10)] = Field(
        default=3, description="Tries per cell before it is marked failed (and named as a gap in the report)."
    )
    lease_seconds: Annotated[int, Field(ge=60, le=30 * 86_400)] = Field(
        default=7_200,
        description="How long a dispatched packet stays leased to its subagent; after that the next next_step "
        "hands its tasks out again.",
    )
    max_packets_per_run: Annotated[int, Field(ge=1, le=2_000)] = Field(
        default=200, description="Packets per review run; the rest waits for the next run."
    )
    since: Annotated[str, Field(max_length=256)] | None = Field(
        default=None,
        description="Audit only the files changed since this git ref (plus untracked files), for an audit that "
        "starts now.",
    )
    # Processes that read the repository's files at intake, on Linux (``engine.scan_parts``: copies forked
    # by the command line, or by the server's helper), at most one a core (or 4).
    intake_processes: Annotated[int, Field(ge=1, le=64)] | None = Field(
        default=None,
        description="Processes that read the files at intake, on Linux, at most one a core (or 4 where there are "
        "fewer cores); 1 reads them all in one process. Unset: one a core, up to 4, from 2,000 files.",
    )
    carry_forward: bool = Field(
        default=True,
        description="A new audit keeps the coverage, findings and threat model of files unchanged since the "
        "previous audit.",
    )
    code_map: bool = Field(
        default=True,
        description="Build the code map at intake: every file in scope parsed with tree-sitter for its definitions, "
        "imports and references, which packing, chunk boundaries and every packet's map follow. Off: intake only "
        "reads the files (several times faster on a large repository), packing follows folders, chunks end at "
        "line counts.",
    )
    context_pass: bool = Field(
        default=True,
        description="Write a threat model before the first review run, carried by every packet (skipped for tiny "
        "repositories).",
    )
    verification_pass: bool = Field(
        default=True,
        description="A verifier tries to refute each finding at or above verify_severity, and each doubtful "
        "duplicate pair.",
    )
    verify_severity: Literal["critical", "high", "medium", "low", "info"] = Field(
        default="high", description="The lowest severity a verifier checks."
    )
    host: HostConfig = Field(default_factory=HostConfig, description=HostConfig.__doc__)
    model: ModelConfig = Field(default_factory=ModelConfig, description=ModelLimits.__doc__)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig, description=SchedulerConfig.__doc__)
    analyzers: AnalyzersConfig = Field(default_factory=AnalyzersConfig, description=AnalyzersConfig.__doc__)
    shared: SharedConfig = Field(default_factory=SharedConfig, description=SharedConfig.__doc__)
    prices: PricesConfig = Field(
        default_factory=PricesConfig,
        description="What the reviewers' model costs per million tokens: forecasts and reports show a cost only "
        "where this prices the model; nothing is built in.",
    )
    # Only the user's own config may set these two (the store may hold other repositories' audits).
    store: Annotated[str, Field(min_length=1, max_length=2_000)] | None = Field(
        default=None,
        description="Where the audit's state lives: unset for SQLite in the artifacts directory, or a "
        "postgresql:// URL shared by hosts (keep the password out of it: libpq reads PGPASSWORD and ~/.pgpass).",
    )
    audit_name: Annotated[str, Field(min_length=1, max_length=200)] | None = Field(
        default=None,
        description="In a shared store, the audit this checkout joins; unset: the repository's identity (its "
        "first commit and origin remote).",
    )


# Keys only the user's own config (--config, AUDIT_MCP_CONFIG) may set: the repository's own .audit-mcp.toml
# comes with the code under audit and is refused them (``_confined``), as TOML names them.
USER_ONLY_KEYS = (
    "store",
    "audit_name",
    "[shared]",
    "[scheduler] half_life_hours",
    "[scheduler] probe",
    "[prices]",
)


# Each variable overrides one setting: (section, key) of SessionConfig.
ENV_OVERRIDES: dict[str, tuple[str, str]] = {
    "AUDIT_MCP_CONTEXT_TOKENS": ("model", "context_tokens"),
    "AUDIT_MCP_OUTPUT_TOKENS": ("model", "output_tokens"),
    "AUDIT_MCP_RPM": ("model", "requests_per_minute"),
    "AUDIT_MCP_ITPM": ("model", "input_tokens_per_minute"),
    "AUDIT_MCP_OTPM": ("model", "output_tokens_per_minute"),
    "AUDIT_MCP_HALF_LIFE_HOURS": ("scheduler", "half_life_hours"),
    "AUDIT_MCP_WAVE_KIND": ("scheduler", "wave_kind"),
    "AUDIT_MCP_DISPATCH_MODE": ("host", "dispatch_mode"),
    "AUDIT_MCP_PROBE": ("scheduler", "probe"),
    "AUDIT_MCP_CLAIM_LEASE_SECONDS": ("shared", "claim_lease_seconds"),
    "AUDIT_MCP_SHARE_LEARNED": ("shared", "learned"),
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
    data["model"] = config.model.as_table()
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
    return config_source(root, explicit)[0]


def config_source(root: Path, explicit: Path | None = None) -> tuple[Path, bool]:
    """The config file to read, and whether the user named it (``True``) or it is the repository's own."""
    if explicit is not None:
        return explicit, True
    env = os.environ.get("AUDIT_MCP_CONFIG")
    if env:
        return Path(env), True
    return root / CONFIG_FILENAME, False


def config_label(root: Path, explicit: Path | None = None) -> str:
    """Where the config comes from, as a reason names it: the user's file, or the repository's own."""
    path, trusted = config_source(root, explicit)
    return f"your config {path}" if trusted else REPOSITORY_CONFIG


def _read(root: Path, path: Path, trusted: bool) -> bytes:
    try:
        return (
            read_capped(path, MAX_CONFIG_BYTES) if trusted else read_confined(root, CONFIG_FILENAME, MAX_CONFIG_BYTES)
        )
    except PathError as exc:
        owner = "" if trusted else " (the repository's own config must be a regular file inside it)"
        raise ConfigError(f"cannot use the config {path}: {exc}{owner}. Fix it and call next_step again.") from exc


def load_config(root: Path, explicit: Path | None = None) -> SessionConfig:
    """Read the session config, with the environment's overrides; a missing file means every default."""
    path, trusted = config_source(root, explicit)
    if not os.path.lexists(path):
        if explicit is not None:
            raise ConfigError(f"config file {path} does not exist; create it or drop --config")
        return with_env(SessionConfig())
    import tomllib  # a repository without a config file (the usual case) never parses TOML

    try:
        data = tomllib.loads(_read(root, path, trusted).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}. Fix the file and call next_step again.") from exc
    try:
        config = SessionConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_problem(err) for err in exc.errors())
        raise ConfigError(f"{path} has invalid settings: {problems}. Fix them and call next_step again.") from exc
    config = _anchored(config, root) if trusted else _confined(config, root, path)
    return with_env(config)


def _problem(err: Mapping[str, Any]) -> str:
    """One validation error, placed as the user wrote it: ``[model."<name>"] key`` for a model's table."""
    loc = [str(p) for p in err["loc"]]
    message = str(err["msg"]).removeprefix("Value error, ")
    if loc[0:1] in (["model"], ["prices"]) and loc[1:2] == ["models"] and len(loc) >= 3:
        where = f'[{loc[0]}."{loc[2]}"]' + (f" {'.'.join(loc[3:])}" if len(loc) > 3 else "")
        if err["type"] == "extra_forbidden":
            message = (
                _NOT_A_LIMIT if loc[0] == "model" else "not a price; a model's prices are " + ", ".join(PRICE_KEYS)
            )
        return f"{where}: {message}"
    if loc in (["model"], ["prices"]) and message.startswith(f"[{loc[0]}]"):
        return message
    return f"{'.'.join(loc) or '(top level)'}: {message}"


def _anchored(config: SessionConfig, root: Path) -> SessionConfig:
    """The user's config: its relative paths are taken from the root, so they read the same from anywhere."""
    anchored = {
        key: [p if Path(p).is_absolute() else str(root / p) for p in getattr(config.analyzers, key)]
        for key in ("sarif", "results")
    }
    return config.model_copy(update={"analyzers": config.analyzers.model_copy(update=anchored)})


def _confined(config: SessionConfig, root: Path, path: Path) -> SessionConfig:
    """The repository's own config: every path inside the root, and nothing only the user may set."""
    named = [("sarif", i, raw) for i, raw in enumerate(config.analyzers.sarif)]
    named += [("results", i, raw) for i, raw in enumerate(config.analyzers.results)]
    for key, i, raw in named:
        try:
            resolve_inside(root, normalize_relpath(raw))
        except PathError as exc:
            raise ConfigError(
                f"{path}: [analyzers] {key}[{i}] = {raw!r} is refused: {exc}. A repository's own config may only "
                "name files inside the repository; to import analyzer output from elsewhere pass it with "
                "--analyzer-results (or --analyzer-sarif), or list it in your own config (--config or "
                "AUDIT_MCP_CONFIG)."
            ) from exc
    for key in ("store", "audit_name"):
        if getattr(config, key) is not None:
            raise ConfigError(
                f"{path}: {key} is refused: where the audit's state lives and which audit it joins are yours to "
                "choose, not the code under audit's (--store / --audit-name, AUDIT_MCP_STORE / AUDIT_MCP_AUDIT_NAME, "
                "or your own config via --config or AUDIT_MCP_CONFIG). Remove the key from the repository's config."
            )
    if "shared" in config.model_fields_set:
        raise ConfigError(
            f"{path}: [shared] is refused: how hosts share an audit and where learned rate-limit state lives are "
            "yours to choose, not the code under audit's (AUDIT_MCP_CLAIM_LEASE_SECONDS, AUDIT_MCP_SHARE_LEARNED, "
            "or your own config via --config or AUDIT_MCP_CONFIG). Remove the table from the repository's config."
        )
    if "half_life_hours" in config.scheduler.model_fields_set:
        raise ConfigError(
            f"{path}: [scheduler] half_life_hours is refused: how long what was learned about your rate limits "
            "counts is kept for every audit you run, so only you can set it (AUDIT_MCP_HALF_LIFE_HOURS, or your own "
            "config via --config or AUDIT_MCP_CONFIG). Remove the key from the repository's config."
        )
    if config.scheduler.probe != "never":
        raise ConfigError(
            f"{path}: [scheduler] probe = {config.scheduler.probe!r} is refused: the provider probe uses your API "
            "key, so only you can turn it on (AUDIT_MCP_PROBE, or your own config via --config or "
            "AUDIT_MCP_CONFIG). Remove the key from the repository's config."
        )
    if "prices" in config.model_fields_set:
        raise ConfigError(
            f"{path}: [prices] is refused: the cost a forecast and a report show is what you decide to spend on, so "
            "only your own config sets the prices (--config or AUDIT_MCP_CONFIG). Remove the table from the "
            "repository's config."
        )
    return config
