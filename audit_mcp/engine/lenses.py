"""Lenses: the ways of reading code, each defined by a file under ``prompts/lenses/``.

A lens text hands some classes of bug to other lenses ("the performance lens owns them"). Such a line
starts with ``(with X)``, and is kept only when lens ``X`` is in the audit; a line starting with
``(without X)`` says what to do instead when it is not, so no class of bug falls between two lenses.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from audit_mcp.core.config import SessionConfig
from audit_mcp.core.errors import ConfigError
from audit_mcp.engine.templates import prompts_dir

# Lenses whose misses cost the most; they raise a packet's model tier.
RISK_LENSES = frozenset({"security", "concurrency"})


_CONDITION = re.compile(r"^(\s*- )\((with|without) ([a-z_]+)\) ")


@dataclass(frozen=True)
class Lens:
    lens_id: str
    title: str
    summary: str
    text: str

    def conditions(self) -> set[str]:
        """The lenses this text's ``(with X)`` and ``(without X)`` lines name."""
        return {m.group(3) for line in self.text.splitlines() if (m := _CONDITION.match(line))}

    def text_for(self, audit_lenses: Collection[str]) -> str:
        """The text as a reviewer in an audit of ``audit_lenses`` reads it."""
        out = []
        for line in self.text.splitlines():
            m = _CONDITION.match(line)
            if m is None:
                out.append(line)
            elif (m.group(3) in audit_lenses) == (m.group(2) == "with"):
                out.append(m.group(1) + line[m.end() :])
        return "\n".join(out) + "\n"


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
