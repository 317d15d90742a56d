"""Lenses: the ways of reading code, each defined by a file under ``prompts/lenses/``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pathspec

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.errors import ConfigError
from audit_mcp.engine.templates import prompts_dir

# Lenses whose misses cost the most; they raise a packet's model tier.
RISK_LENSES = frozenset({"security", "concurrency"})


@dataclass(frozen=True)
class Lens:
    lens_id: str
    title: str
    summary: str
    text: str


def available_lenses() -> dict[str, Lens]:
    out: dict[str, Lens] = {}
    for path in sorted((prompts_dir() / "lenses").glob("*.md")):
        text = path.read_text(encoding="utf-8").strip() + "\n"
        lines = text.splitlines()
        title = lines[0].lstrip("# ").strip() if lines and lines[0].startswith("# ") else path.stem
        summary = next((ln.strip() for ln in lines[1:] if ln.strip() and not ln.startswith("#")), title)
        out[path.stem] = Lens(path.stem, title, summary, text)
    return out


def resolve_lenses(config: SessionConfig) -> list[Lens]:
    """The lenses the config selects, in config order; unknown names are a config error."""
    known = available_lenses()
    wanted = list(dict.fromkeys([*config.lenses, *(n for r in config.lens_rules for n in r.lenses)]))
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise ConfigError(
            f"unknown lens(es) {unknown} in the config; choose from {sorted(known)} "
            "(each is a file under prompts/lenses/)"
        )
    if not config.lenses and not config.lens_rules:
        raise ConfigError("the config selects no lens; list at least one under `lenses`")
    return [known[name] for name in wanted]


class LensSelector:
    """Which lenses apply to a path: the last matching ``lens_rules`` entry, else ``lenses``."""

    def __init__(self, config: SessionConfig) -> None:
        self._default = list(config.lenses)
        self._rules = [(pathspec.GitIgnoreSpec.from_lines([r.glob]), list(r.lenses)) for r in config.lens_rules]

    def for_path(self, path: str) -> Sequence[str]:
        chosen = self._default
        for spec, lenses in self._rules:
            if spec.match_file(path):
                chosen = lenses
        return chosen
