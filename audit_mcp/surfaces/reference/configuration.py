"""The configuration reference, from the pydantic config model: every key as TOML names it, its type, bounds,
default and description (a field without a description stops the generator), the environment variables, and
what the repository's own config may not set."""

from __future__ import annotations

import json
from typing import Any, get_args, get_origin

from pydantic import BaseModel

from audit_mcp.core.config import CONFIG_FILENAME, ENV_OVERRIDES, USER_ONLY_KEYS, SessionConfig
from audit_mcp.core.userstate import STATE_ENV
from audit_mcp.surfaces.http_auth import TOKEN_ENV
from audit_mcp.surfaces.reference.markdown import STAMP, bounds, md, summary, table
from audit_mcp.surfaces.workers import FIELDS
from audit_mcp.usecases.claiming import HOST_ENV


def _toml(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return ""
    return f"`{json.dumps(value) if not isinstance(value, bool) else str(value).lower()}`"


_KEYS = ["key", "type and bounds", "default", "what it does"]


def _tables_in(annotation: Any) -> type[BaseModel] | None:
    """The model of a config table (``[host]``) or of an array of tables (``[[lens_rules]]``), if any."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _config_rows(model: type[BaseModel]) -> tuple[list[list[str]], list[tuple[str, type[BaseModel]]]]:
    """Rows for the keys of ``model``, and the tables (nested models, arrays of them) it holds."""
    schema = model.model_json_schema()
    rows, tables = [], []
    for name, field in model.model_fields.items():
        if not field.description:
            raise ValueError(f"{model.__name__}.{name} has no description: add one (it is the reference's text)")
        nested = _tables_in(field.annotation)
        if nested is not None and name != "models":
            tables.append((name, nested))
            if get_origin(field.annotation) is not list:
                continue
        default = "required" if field.is_required() else _toml(field.get_default(call_default_factory=True))
        shape = summary(schema["properties"][name]) if nested is None else f"array of `[[{name}]]` tables, below"
        rows.append([f"`{name}`", shape, default, field.description])
    return rows, tables


def page() -> str:
    rows, tables = _config_rows(SessionConfig)
    out = [
        "# Configuration reference",
        "",
        STAMP,
        "",
        f"The session config is TOML: `<root>/{CONFIG_FILENAME}` (the repository's own, untrusted), or the file "
        "you name with `--config FILE` or `AUDIT_MCP_CONFIG` (yours). Every key is optional. "
        "[Configuration](../configuration.md) explains how the keys work together.",
        "",
        "## Top-level keys",
        "",
        *table(_KEYS, rows),
    ]
    for name, model in tables:
        description = md(SessionConfig.model_fields[name].description)
        rows, _ = _config_rows(model)
        if name == "model":
            models = next(r for r in rows if r[0] == "`models`")
            count = bounds(model.model_json_schema()["properties"]["models"])
            out += [
                '## `[model]` and `[model."<name>"]`',
                "",
                f"{description} Each limit is taken, key by key, from the first that sets it: an `AUDIT_MCP_*` "
                "variable, the model's own table, `[model]`, the built-in table of known models.",
                "",
                *table(_KEYS, [r for r in rows if r is not models]),
                f'`[model."<name>"]` tables take the same keys ({count}). {md(models[3])}',
                "",
            ]
            continue
        heading = f"[[{name}]]" if get_origin(SessionConfig.model_fields[name].annotation) is list else f"[{name}]"
        out += [f"## `{heading}`", "", description, "", *table(_KEYS, rows)]
    out += _environment()
    out += [
        "## What the repository's own config may not set",
        "",
        f"The repository's own `{CONFIG_FILENAME}` comes with the code under audit, so it is untrusted: it must be a "
        "regular file inside the root, every path it names must resolve inside the root, and it may not set "
        + ", ".join(f"`{key}`" for key in USER_ONLY_KEYS)
        + " (`probe` other than `never`). A refusal names the key and where you can set it instead: your own config "
        "(`--config`, `AUDIT_MCP_CONFIG`), a command-line option or an environment variable.",
        "",
    ]
    return "\n".join(out).rstrip() + "\n"


def _environment() -> list[str]:
    def place(section: str, key: str) -> str:
        return f"`[{section}] {key}`" if section else f"`{key}`"

    others = [
        ["AUDIT_MCP_CONFIG", "The config file to read instead of the repository's own (yours, so trusted)."],
        ["AUDIT_MCP_STORE", "Where state lives, as `--store`: `sqlite` or a `postgresql://` URL."],
        ["AUDIT_MCP_AUDIT_NAME", "In a shared store, the audit this checkout joins, as `--audit-name`."],
        [STATE_ENV, "Your state directory, as `--state-dir` (the sealing key, learned rate limits, the HTTP token)."],
        [TOKEN_ENV, "The bearer token `serve --http` requires (at least 16 characters)."],
        [HOST_ENV, "This host's name among the hosts of a shared audit (default: the machine and checkout)."],
    ]
    workers = [f"AUDIT_MCP_{name.upper()}" for name in FIELDS] + ["AUDIT_MCP_RESULTS_MODE"]
    return [
        "## Environment variables",
        "",
        "Each of these overrides one key, wins over every config file, and is checked exactly as the key is:",
        "",
        *table(["variable", "key"], [[f"`{var}`", place(*where)] for var, where in ENV_OVERRIDES.items()]),
        "These choose where things are:",
        "",
        *table(["variable", "what"], [[f"`{var}`", what] for var, what in others]),
        "`audit-mcp run` sets these for each worker command it starts (the values of the template's "
        "placeholders, and `submit` or `file` for the results mode): " + ", ".join(f"`{w}`" for w in workers) + ".",
        "",
    ]
