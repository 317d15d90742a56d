"""The files of a plain directory (no git), honouring its ``.gitignore`` files as git does.

Each ``.gitignore`` speaks for its own directory and everything below it, with paths relative to that
directory. For one path the deepest file with a matching pattern decides, and within a file the last
matching pattern wins (``Globs.decide`` says which, and whether it was a ``!`` negation), so a
deeper ``!keep.log`` re-includes what a higher ``*.log`` ignores. As in git, nothing can re-include a file
whose directory is ignored: ignored directories are never entered.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from pathlib import Path

from audit_mcp.engine.globs import Globs, lenient_globs

IGNORE_FILE = ".gitignore"


class IgnoreRules:
    """The ``.gitignore`` patterns met so far, by the directory (repo-relative, "" for the root) they live in."""

    def __init__(self) -> None:
        self._specs: dict[str, Globs] = {}

    def add(self, directory: str, lines: Iterable[str]) -> None:
        self._specs[directory] = lenient_globs(lines)

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether git would ignore ``path`` (repo-relative, POSIX), given that its parent directories are not."""
        directory = posixpath.dirname(path)
        while True:
            spec = self._specs.get(directory)
            if spec is not None:
                below = path[len(directory) + 1 :] if directory else path
                decision, _ = spec.decide(below + "/" if is_dir else below)
                if decision is not None:
                    return decision
            if not directory:
                return False
            directory = posixpath.dirname(directory)


def walk_paths(root: Path) -> list[str]:
    """Every file under ``root`` that git would list as untracked and not ignored (``.git`` itself left out)."""
    rules = IgnoreRules()
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir
        if IGNORE_FILE in filenames:
            try:
                text = (Path(dirpath) / IGNORE_FILE).read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            rules.add(rel_dir, text.splitlines())
        dirnames[:] = [
            d for d in sorted(dirnames) if d != ".git" and not rules.ignored(posixpath.join(rel_dir, d), True)
        ]
        out.extend(rel for name in filenames if not rules.ignored(rel := posixpath.join(rel_dir, name), False))
    return sorted(out)
