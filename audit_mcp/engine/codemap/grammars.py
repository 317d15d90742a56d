"""Which tree-sitter grammar reads a file, and its query, loaded once per process (its parser once per thread).

The grammars come compiled in ``tree-sitter-language-pack`` (pinned to a version whose wheels carry them: the
map never downloads anything). A language with a query of its own (``queries``) is mapped in full; any other
language the pack parses gets a query made from the node kinds its grammar declares (``generic``), which finds
definitions and calls by the names most grammars give them.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any, cast

from tree_sitter import Language, Parser, Query, QueryCursor, QueryError

from audit_mcp.engine.codemap import generic, queries

# The project's language names (``engine.languages``) to the pack's grammar names, where they differ or where
# the pack has a grammar. A language missing here is not parsed.
_GRAMMAR_OF = {
    "python": "python",
    "javascript": "javascript",
    "typescript": "typescript",
    "go": "go",
    "java": "java",
    "kotlin": "kotlin",
    "rust": "rust",
    "c": "c",
    "cpp": "cpp",
    "csharp": "csharp",
    "ruby": "ruby",
    "php": "php",
    "scala": "scala",
    "swift": "swift",
    "lua": "lua",
    "dart": "dart",
    "elixir": "elixir",
    "erlang": "erlang",
    "haskell": "haskell",
    "ocaml": "ocaml",
    "clojure": "clojure",
    "groovy": "groovy",
    "perl": "perl",
    "r": "r",
    "julia": "julia",
    "zig": "zig",
    "nim": "nim",
    "solidity": "solidity",
    "objc": "objc",
    "fsharp": "fsharp",
    "shell": "bash",
    "elm": "elm",
}


def grammar_for(path: str, language: str) -> str | None:
    """The grammar that reads ``path`` (of ``language``), or ``None`` when the map does not parse it."""
    if language == "typescript" and path.endswith(".tsx"):
        return "tsx"
    return _GRAMMAR_OF.get(language)


def family(grammar: str) -> str:
    """The module system a grammar's files share (``tsx`` files import TypeScript and JavaScript alike)."""
    if grammar in ("javascript", "typescript", "tsx"):
        return "js"
    if grammar in ("c", "cpp", "objc"):
        return "c"
    if grammar in ("java", "kotlin", "scala", "groovy"):
        return "jvm"
    return grammar


_THREAD = threading.local()  # each thread's parsers and query cursors, by grammar


@dataclass(frozen=True)
class Grammar:
    """A loaded grammar: its language and compiled query (shared: neither changes once made), and what each of
    the query's patterns finds (``roles``)."""

    name: str
    language: Language
    query: Query
    roles: tuple[str, ...]

    def tools(self) -> tuple[Parser, QueryCursor]:
        """This thread's parser and query cursor for the grammar, reused for every file it reads (neither may
        be used by two threads at once: the server runs tools on several)."""
        kept: dict[str, tuple[Parser, QueryCursor]] | None = getattr(_THREAD, "tools", None)
        if kept is None:
            kept = _THREAD.tools = {}
        found = kept.get(self.name)
        if found is None:
            found = kept[self.name] = (Parser(self.language), QueryCursor(self.query))
        return found


# What a pattern finds, by the captures its text names, most specific first.
_ROLES = (
    ("@def.", "def"),
    ("@import.spec", "import.spec"),
    ("@import", "import"),
    ("@package", "package"),
    ("@str", "str"),
    ("@call", "call"),
    ("@use", "use"),
)


def roles(query: Query, source: str) -> tuple[str, ...]:
    """The role of each pattern of ``query`` (compiled from ``source``)."""
    raw = source.encode("utf-8")
    out = []
    for index in range(query.pattern_count):
        text = raw[query.start_byte_for_pattern(index) : query.end_byte_for_pattern(index)].decode("utf-8")
        out.append(next((role for mark, role in _ROLES if mark in text), ""))
    return tuple(out)


@functools.cache
def load(name: str) -> Grammar | None:
    """The grammar ``name`` with its query, or ``None`` when the pack lacks it or no query can be made."""
    # Imported when a file is first read: the pack's import costs more than the views that never parse need.
    from tree_sitter_language_pack import get_language

    try:
        language = get_language(cast(Any, name))
    except LookupError:
        return None
    source = queries.QUERIES.get(name) or _generic_source(language)
    if not source:
        return None
    query = Query(language, source)
    return Grammar(name, language, query, roles(query, source))


def _generic_source(language: Language) -> str:
    """The patterns ``generic`` proposes that this grammar accepts (each tried alone: a grammar without a
    node kind or field a pattern names refuses it)."""
    kept = []
    for pattern in generic.patterns(language):
        try:
            Query(language, pattern)
        except QueryError:
            continue
        kept.append(pattern)
    return "\n".join(kept)
