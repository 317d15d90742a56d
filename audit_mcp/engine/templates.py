"""The product's prompts: loading files under ``prompts/`` and filling ``{{placeholders}}``.

Rendering is strict: a placeholder without a value, or a value the template
never uses, is an error, so a template and its caller cannot drift apart.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from audit_mcp.core.errors import ConfigError

_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")


@cache
def prompts_dir() -> Path:
    """``prompts/`` inside the installed wheel, or beside the package in a source checkout."""
    package = Path(__file__).resolve().parents[1]  # audit_mcp/
    for candidate in (package / "prompts", package.parent / "prompts"):
        if (candidate / "lenses").is_dir():
            return candidate
    raise ConfigError("the prompts/ directory is missing from this installation; reinstall audit-mcp")


def load(name: str) -> str:
    """The text of ``prompts/<name>`` (e.g. ``steps/dispatch_review.md``)."""
    path = prompts_dir() / name
    if not path.is_file():
        raise ConfigError(f"prompt template {name} is missing from this installation; reinstall audit-mcp")
    return path.read_text(encoding="utf-8")


def placeholders(template: str) -> set[str]:
    return set(_PLACEHOLDER.findall(template))


def render(name: str, **values: str) -> str:
    template = load(name)
    wanted = placeholders(template)
    missing = wanted - values.keys()
    unused = values.keys() - wanted
    if missing or unused:
        raise ConfigError(f"template {name}: missing values {sorted(missing)}, unused values {sorted(unused)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
