"""Reference pages generated from the code, so they cannot drift from it.

Three pages of the documentation site are written from what the program itself says: the command line from
its argparse parser (every verb, its help, every option with its help, default and choices), the
configuration from the pydantic config model (every key as TOML names it, its type, bounds, default and
description, the environment variables, and what the repository's own config may not set), and the MCP surface
from the server, listed through an in-memory client (tools and their arguments, resources, resource templates,
prompts, and the submission schema the server publishes).

``python -m audit_mcp.surfaces.reference`` writes them to ``docs/reference/``; ``--check`` only compares,
and exits 1 naming every page that differs. A test does the same comparison.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from audit_mcp.surfaces.reference import command_line, configuration, mcp_surface
from audit_mcp.surfaces.reference.markdown import REGENERATE

__all__ = ["PAGES", "REGENERATE", "main", "pages", "stale"]

PAGES = ("cli.md", "config.md", "mcp.md")


def pages() -> dict[str, str]:
    """Every reference page by file name, as the code produces it now."""
    makers: dict[str, Callable[[], str]] = {
        "cli.md": command_line.page,
        "config.md": configuration.page,
        "mcp.md": mcp_surface.page,
    }
    return {name: makers[name]() for name in PAGES}


def stale(folder: Path) -> list[str]:
    """The pages in ``folder`` that differ from what the code produces (or are missing)."""
    wanted = pages()
    return [
        name
        for name, text in wanted.items()
        if not (folder / name).is_file() or (folder / name).read_text(encoding="utf-8") != text
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=REGENERATE, description="Write the generated reference pages.")
    parser.add_argument("--out", type=Path, default=Path("docs/reference"), help="folder (default docs/reference)")
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when a page differs")
    args = parser.parse_args(argv)
    if args.check:
        differ = stale(args.out)
        for name in differ:
            print(f"{args.out / name} differs from the code; run `{REGENERATE}`", file=sys.stderr)
        return 1 if differ else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in pages().items():
        (args.out / name).write_text(text, encoding="utf-8")
        print(args.out / name)
    return 0
