"""Gitignore-style patterns, matched in time linear in the path whatever the pattern.

Patterns come from the repository under audit (its ``.audit-mcp.toml`` ``include``, ``exclude`` and
``[[lens_rules]]`` globs, the ``.gitignore`` files of a folder that is not a git repository) and from
requeue choices. pathspec turns each into a regular expression; with Python's backtracking engine a
pattern such as forty ``*`` in a row takes minutes on one path. These specs match with RE2 instead
(``google-re2``, pathspec's ``re2`` backend): an automaton, linear in the path, so no pattern a
repository writes can stall an audit.

RE2 takes UTF-8 text only: a path that is not (a file name git lists as raw bytes, kept as lone
surrogates) is matched with each such character read as U+FFFD, which ``*`` and ``?`` match as they match
the byte.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Sequence

import pathspec
import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from audit_mcp.core.errors import ConfigError

BACKEND = "re2"
_SURROGATES = re.compile("[\ud800-\udfff]")
# What a pattern pathspec, ``re`` or RE2 cannot read raises (GitIgnorePatternError and UnicodeError are
# ValueErrors).
_PATTERN_ERRORS = (ValueError, re.error, re2.error)


def _text(value: str) -> str:
    return value if value.isascii() else _SURROGATES.sub("\ufffd", value)


def _compile(lines: Sequence[str]) -> pathspec.GitIgnoreSpec:
    with warnings.catch_warnings():
        # pathspec compiles each pattern with ``re`` too, which warns of sets RE2 reads fine ("[[").
        warnings.simplefilter("ignore", FutureWarning)
        return pathspec.GitIgnoreSpec.from_lines([_text(line) for line in lines], backend=BACKEND)


def _broken(line: str) -> str | None:
    """Why one pattern cannot be used, or ``None``."""
    try:
        _compile([line])
    except _PATTERN_ERRORS as exc:
        return str(exc).splitlines()[0][:200] or type(exc).__name__
    return None


class Globs:
    """Gitignore patterns in order: the last one matching a path (or a folder above it) decides."""

    def __init__(self, lines: Sequence[str], spec: pathspec.GitIgnoreSpec) -> None:
        self.lines = tuple(lines)
        self._spec = spec

    def match(self, path: str) -> bool:
        """Whether the patterns select ``path`` (repo-relative, POSIX; a trailing ``/`` for a folder)."""
        return bool(self.lines) and bool(self._spec.match_file(_text(path)))

    def decide(self, path: str) -> tuple[bool | None, int | None]:
        """The deciding pattern's verdict on ``path`` (``True`` selected, ``False`` re-included by a ``!``
        pattern, ``None`` no pattern matches) and its index in ``lines``."""
        if not self.lines:
            return None, None
        result = self._spec.check_file(_text(path))
        return result.include, result.index


def compile_globs(lines: Iterable[str], *, source: str) -> Globs:
    """The patterns of ``lines``; a malformed one is a ``ConfigError`` naming ``source`` and the pattern."""
    kept = list(lines)
    try:
        return Globs(kept, _compile(kept))
    except _PATTERN_ERRORS as exc:  # found again below, pattern by pattern, to name the bad one
        for line in kept:
            if (why := _broken(line)) is not None:
                raise ConfigError(f"{source}: the pattern {line!r} cannot be used ({why}); fix or remove it") from exc
        raise ConfigError(f"{source}: the patterns cannot be used ({exc}); fix them") from exc


def lenient_globs(lines: Iterable[str]) -> Globs:
    """The patterns of ``lines`` that can be used, the others left out, as git leaves out a pattern it cannot
    read (a ``.gitignore`` file of the repository's)."""
    kept = list(lines)
    try:
        return Globs(kept, _compile(kept))
    except _PATTERN_ERRORS:  # the bad patterns are dropped one by one below
        usable = [line for line in kept if _broken(line) is None]
        return Globs(usable, _compile(usable))
