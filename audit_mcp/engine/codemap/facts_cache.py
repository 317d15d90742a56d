"""The code map's facts cache: each file's facts (``extract``) kept in the store by the file's content hash and
the grammar that read it, so that an audit parses only the files whose bytes the store has no facts of.

A row is keyed by the file's sha256 (intake hashes every file anyway) and its grammar, under the version of
the extraction (``version``: ``EXTRACTOR_VERSION``, the installed tree-sitter and tree-sitter-language-pack, a
digest of the code that turns a tree into facts, queries included, and marshal's format), which the store
keeps once for all its rows: facts another grammar, query or extractor made are never read, and the first
audit of a new version replaces them. With a file that is chunked, the lines its chunks may start at are kept
too, with the chunk size they were found for.

Packed (``pack``) as ``marshal`` data of plain values (the definitions as columns, each field in a tuple of
its own; the imports, references and strings as the facts keep them), compressed by zlib with a dictionary
of the store's own, sampled from the first facts it records (the files of one repository share most of their
names and framing: about a quarter of the size without it on the benchmark repository). Read back (``unpack``)
defensively: a row that does not decompress, does not decode, or whose values are not exactly the types,
widths and lengths expected is ignored, and its file parsed again. The check runs over columns in C
(``set(map(type, column))``), so it costs little (about 16 µs a file, decoding included). Nothing is
unpickled.

The store is read whole, once, before intake scans (``FactsCache.load``); the processes that read slices of
the files are given the keys it holds (``known``) and answer a file whose facts are cached with its key
instead of parsing it (``lookup``); the caller takes the facts from its cache (``FactsCache.take``).
"""

from __future__ import annotations

import functools
import gc
import hashlib
import marshal
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.codemap import common_names, extract, generic, grammars, import_nodes, queries
from audit_mcp.engine.codemap.extract import Facts
from audit_mcp.engine.codemap.grammars import grammar_for
from audit_mcp.engine.coverage import chunk_limits
from audit_mcp.store.records import FileRow

# Raised by hand when what the extraction finds changes in a way its code's digest cannot show.
EXTRACTOR_VERSION = 1
# Rows are kept for the files of the latest two audits: a re-audit or an incremental audit reads the last
# one's, and an audit of another branch between two of the same one loses nothing.
KEEP_AUDITS = 2
ZDICT_BYTES = 4_096  # zlib's dictionary: more costs time on every row for little (measured)
_ZDICT_SAMPLES = 32  # rows, spread over those packed, that the dictionary is sampled from
_MAX_UNPACKED = 64 << 20  # no file's facts come near it: a row that would is not read
_KINDS = frozenset({"class", "function", "method"})
_HOWS = frozenset({"call", "use"})
_CUTS = re.compile(r"\d+(,\d+)*")
_PLAIN, _DICT = b"\x00", b"\x01"

# A cached file's cuts: the lines per chunk they were found for and the cuts as the manifest keeps them, or
# ``None`` when the file was not chunked then.
Cut = tuple[int, str | None] | None
Row = tuple[str, str, bytes]  # sha256, grammar, packed facts


@functools.cache
def version() -> tuple[str, str]:
    """The extraction's version: a short digest that keys the store's rows, and what it is a digest of."""
    code = hashlib.sha256()
    for module in (extract, queries, generic, grammars, import_nodes, common_names):
        code.update(Path(module.__file__ or "").read_bytes() if module.__file__ else module.__name__.encode())
    label = (
        f"facts {EXTRACTOR_VERSION}; tree-sitter {_installed('tree-sitter')}; tree-sitter-language-pack "
        f"{_installed('tree-sitter-language-pack')}; code {code.hexdigest()[:12]}; marshal {marshal.version}"
    )
    return hashlib.sha256(label.encode("utf-8")).hexdigest()[:16], label


def _installed(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def grammar_key(path: str, language: str) -> str | None:
    """The grammar a file's cached facts are keyed by; ``None`` for a file read without parsing (``go.mod``)."""
    if path == "go.mod" or path.endswith("/go.mod"):
        return None
    return grammar_for(path, language)


def lookup(
    known: Mapping[str, Cut], path: str, language: str, sha: str, per_chunk: int | None
) -> tuple[str, str | None] | None:
    """The key of a file's cached facts and its cuts (``per_chunk``: the lines a chunk of it holds when it is
    chunked), or ``None`` when it must be parsed: no facts of its bytes, or none cut for that chunk size."""
    grammar = grammar_key(path, language)
    if grammar is None:
        return None
    key = sha + grammar
    if key not in known:
        return None
    if per_chunk is None:
        return key, None
    cut = known[key]
    return (key, cut[1]) if cut is not None and cut[0] == per_chunk else None


@dataclass
class FactsCache:
    """The store's cached facts of one version, as intake uses them, and what intake parsed besides."""

    version: str
    label: str
    zdict: bytes = b""
    facts: dict[str, Facts] = field(default_factory=dict)
    known: dict[str, Cut] = field(default_factory=dict)  # what the scanning processes are given
    ignored: int = 0  # rows that did not unpack (their files were parsed again)
    hits: int = 0
    parsed: list[tuple[FileRow, Facts]] = field(default_factory=list)

    @classmethod
    def load(cls, zdict: bytes, rows: Iterable[tuple[str, str, Any]]) -> FactsCache:
        """The cache of the store's rows of this version (``zdict`` the version's dictionary)."""
        key, label = version()
        cache = cls(key, label, zdict)
        # Hundreds of thousands of tuples, none in a cycle: the collector would walk them all, again and
        # again, while they are made (a third of the time).
        collecting = gc.isenabled()
        gc.disable()
        try:
            for sha, grammar, packed in rows:
                found = unpack(packed, zdict, grammar) if isinstance(sha, str) and isinstance(grammar, str) else None
                if found is None:
                    cache.ignored += 1
                    continue
                cache.facts[sha + grammar], cache.known[sha + grammar] = found
        finally:
            if collecting:
                gc.enable()
        return cache

    def take(self, row: FileRow, found: Facts | str) -> Facts:
        """A scanned file's facts: from the cache when the scan answered with a key, else as parsed (kept, to
        be recorded)."""
        if isinstance(found, str):
            self.hits += 1
            return self.facts[found]
        if grammar_key(row.path, row.language) == found[0]:
            self.parsed.append((row, found))
        return found

    def packed(self, config: SessionConfig) -> tuple[bytes, list[Row]]:
        """The rows of what was parsed, and the dictionary they are packed with (the version's, or one sampled
        from them when it has none; empty when there is too little to sample)."""
        found: dict[tuple[str, str], tuple[Facts, Cut]] = {}
        for row, facts in self.parsed:
            threshold, per_chunk = chunk_limits(row, config)
            found[(row.sha256, facts[0])] = (facts, (per_chunk, row.cuts) if row.line_count > threshold else None)
        keys = list(found)
        step = max(1, len(keys) // _ZDICT_SAMPLES)
        zdict = self.zdict or sample([marshal.dumps(columns(*found[k])) for k in keys[::step][:_ZDICT_SAMPLES]])
        return zdict, [
            (sha, grammar, pack(marshal.dumps(columns(*found[sha, grammar])), zdict)) for sha, grammar in keys
        ]


def taker(cache: FactsCache | None) -> Callable[[FileRow, Facts | str], Facts]:
    """What gives a scanned file's facts: ``cache.take``, or with no cache the facts as parsed."""
    if cache is not None:
        return cache.take

    def parsed(row: FileRow, found: Facts | str) -> Facts:
        if isinstance(found, str):
            raise TypeError(f"{row.path}: a cache key from a scan given no cache")
        return found

    return parsed


def columns(facts: Facts, cut: Cut) -> tuple[Any, ...]:
    """A file's facts as the cache keeps them (before packing): each field of its definitions a tuple of its
    own, its imports, references and strings as the facts keep them (``marshal`` bytes), the chunk size and
    the cuts."""
    grammar, package, defs, rest = facts
    span, cuts = cut if cut is not None else (None, None)
    return (grammar, package, _split(defs, 5), rest, span, cuts)


def _split(rows: Any, width: int) -> tuple[Any, ...]:
    """Rows as columns (``width`` of them), or ``()`` for rows that are not tuples of that width."""
    if not rows:
        return ((),) * width
    if type(rows) is not list or set(map(type, rows)) != {tuple}:
        return ()
    split = tuple(zip(*rows, strict=True))
    return split if len(split) == width else ()


def sample(raw: list[bytes]) -> bytes:
    """A dictionary for zlib from rows packed as ``columns`` (empty when they are too few to make one)."""
    joined = b"".join(raw)
    return joined[-ZDICT_BYTES:] if len(joined) >= ZDICT_BYTES else b""


def pack(data: bytes, zdict: bytes) -> bytes:
    if not zdict:
        return _PLAIN + zlib.compress(data, 1)
    packer = zlib.compressobj(1, zdict=zdict)
    return _DICT + packer.compress(data) + packer.flush()


def unpack(packed: Any, zdict: bytes, grammar: str) -> tuple[Facts, Cut] | None:
    """A row's facts and cuts, or ``None`` for a row that is not exactly what ``pack`` writes."""
    if not isinstance(packed, bytes | memoryview) or len(packed) < 2:
        return None
    view = memoryview(packed)
    how = bytes(view[:1])
    if (how == _DICT and not zdict) or how not in (_DICT, _PLAIN):
        return None
    try:
        reader = zlib.decompressobj(zdict=zdict) if how == _DICT else zlib.decompressobj()
        data = reader.decompress(view[1:], _MAX_UNPACKED)
        if not reader.eof or reader.unconsumed_tail or reader.unused_data:
            return None
        found = marshal.loads(data)
    except (zlib.error, ValueError, EOFError, TypeError):
        return None
    return _checked(found, grammar)


def _checked(found: Any, grammar: str) -> tuple[Facts, Cut] | None:
    if type(found) is not tuple or len(found) != 6:
        return None
    name, package, defs, rest, span, cuts = found
    if name != grammar or type(package) is not str or type(rest) is not bytes:
        return None
    try:  # the rows of a group as columns; a group that is not rows of its width does not split
        imports, refs, strings = marshal.loads(rest)
        groups = (defs, _split(imports, 4), _split(refs, 4), _split(strings, 3))
        d_name, d_kind, d_start, d_end, d_parent = defs
        (i_spec, i_name, i_alias, i_line), (r_chain, r_how, r_line, r_count), (s_text, s_line, s_ctx) = groups[1:]
    except (EOFError, TypeError, ValueError):
        return None
    if type(defs) is not tuple or set(map(type, defs)) != {tuple} or len(set(map(len, defs))) != 1:
        return None
    # Every value of every column exactly its type, checked in C over the columns joined.
    texts = d_name + d_kind + d_parent + i_spec + i_name + i_alias + r_chain + r_how + s_text + s_ctx
    numbers = d_start + d_end + i_line + r_line + r_count + s_line
    if not set(map(type, texts)) <= {str} or not set(map(type, numbers)) <= {int}:
        return None
    if not _KINDS.issuperset(d_kind) or not _HOWS.issuperset(r_how):
        return None
    if span is None:
        if cuts is not None:
            return None
        cut: Cut = None
    elif type(span) is int and span > 0 and (cuts is None or (type(cuts) is str and _CUTS.fullmatch(cuts))):
        cut = (span, cuts)
    else:
        return None
    return (name, package, list(zip(*defs, strict=True)), rest), cut
