"""Intake: the repository manifest — every file in scope, and every file skipped with a reason."""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from audit_mcp.core.config import CONFIG_FILENAME, SessionConfig
from audit_mcp.core.errors import ConfigError
from audit_mcp.engine import file_stat, scan_parts
from audit_mcp.engine.attributes import UNSPECIFIED, Attributes
from audit_mcp.engine.codemap.extract import Facts, map_file
from audit_mcp.engine.codemap.facts_cache import Cut, FactsCache, lookup, taker
from audit_mcp.engine.codemap.model import CodeMap
from audit_mcp.engine.codemap.resolve import build as build_map
from audit_mcp.engine.content_checks import content_skip, wide_line
from audit_mcp.engine.coverage import chunk_limits, encode_cuts, max_unit_chars
from audit_mcp.engine.file_kinds import FileKind
from audit_mcp.engine.git import GitReader
from audit_mcp.engine.git_listing import git_paths, git_snapshot, has_attribute_files, linguist_attributes
from audit_mcp.engine.globs import compile_globs
from audit_mcp.engine.ignores import walk_paths
from audit_mcp.engine.languages import detect_language
from audit_mcp.engine.scoping import Scoper
from audit_mcp.store.records import FileRow

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_OPEN_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


@dataclass(frozen=True)
class Manifest:
    files: list[FileRow]
    code_map: CodeMap
    git_head: str | None
    git_dirty: bool
    digest: str
    source: str  # "git" or "walk"
    in_scope: list[FileRow] = field(default_factory=list)
    # How many processes read the files (``scan_parts``), and why any slice was read again by this one.
    processes: int = 1
    redone: list[str] = field(default_factory=list)

    @property
    def edges(self) -> list[tuple[str, str]]:
        """The map's edges as (from, to) pairs of files."""
        return [(e.src, e.dst) for e in self.code_map.edges]


_NOT_UTF8 = "the file name is not UTF-8 (shown with \\x escapes); rename the file to have it reviewed"


def _undecodable(rel: str) -> str | None:
    """The printable form of a path whose name is not UTF-8 (git and the walk decode it with surrogate
    escapes, which nothing downstream can store or print), or ``None`` for a normal name."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return None


# A scanned file's row, and its facts: parsed, or the key of its facts in the cache (``codemap.facts_cache``).
_Scanned = tuple[FileRow, Facts | str | None]


def _scanner(
    root: Path, scoper: Scoper, *, code_map: bool = True, facts: bool = True, known: Mapping[str, Cut] | None = None
) -> Callable[[str], _Scanned]:
    """What reads one file of ``root`` (already resolved) into its manifest row, with its part of the code
    map when it is in scope and ``code_map`` (``codemap.extract``: its facts unless ``facts`` is false, and
    for a file that is chunked, the lines its chunks may start at; for a file whose facts are ``known`` to the
    cache, their key instead). Everything that is the same for every file is looked up once here: this runs
    once per file of the repository."""
    config = scoper.config
    limit = config.max_file_bytes
    base = f"{root}{os.sep}"  # a plain string joined to each name, not a Path
    judge, by_header, attributes = scoper.judge, scoper.by_header, scoper.attributes
    units: dict[str, int] = {}  # the widest line a packet holds, by language
    time_ns, os_open, fstat, read, close, is_regular = time.time_ns, os.open, os.fstat, os.read, os.close, stat.S_ISREG
    sha256, record = hashlib.sha256, file_stat.record

    def scan(rel: str) -> _Scanned:
        language = detect_language(rel)
        full = base + rel
        read_at = time_ns()
        try:
            if not _NOFOLLOW and Path(full).is_symlink():
                raise OSError(errno.ELOOP, "symbolic link")
            # O_NOFOLLOW: a symlink is never followed here (ELOOP sends it to the check below), even one swapped
            # in after listing; O_NONBLOCK: opening a FIFO does not wait for a writer.
            fd = os_open(full, _OPEN_FLAGS)
        except OSError as exc:
            return _skipped(scoper, rel, language, _unopened(root, full, exc))
        try:
            st = fstat(fd)
            if not is_regular(st.st_mode):
                return _skipped(scoper, rel, language, "not a regular file")
            size = st.st_size
            if size > limit:
                reason = f"oversize: {size} bytes > max_file_bytes {limit} (raise it in the config)"
                return _skipped(scoper, rel, language, reason, size)
            # One byte more than its size: a file that grew since fstat reads on (up to the limit). A read of
            # exactly its size reached its end, so the read that would return nothing is not made.
            data = read(fd, size + 1)
            if len(data) != size:
                data = _read_rest(fd, data, limit)
        except OSError as exc:
            return _skipped(scoper, rel, language, f"unreadable: {exc.strerror or exc}")
        finally:
            close(fd)
        size = len(data)
        if size > limit:
            reason = f"oversize: more than max_file_bytes {limit} (raise it in the config)"
            return _skipped(scoper, rel, language, reason, size)
        if data[:2] == b"#!":  # a file its name says nothing about may have a shebang (nothing else changes)
            language = detect_language(rel, data[:256])
        marks = attributes.get(rel, UNSPECIFIED) if attributes else UNSPECIFIED
        kind, why = judge(rel, language, marks)
        sha = sha256(data).hexdigest()
        if why is None:
            why = content_skip(data, size, marks, by_header, rel)
        if why is None:
            if (unit := units.get(language)) is None:
                unit = units[language] = max_unit_chars(language, config)
            if (wide := wide_line(data, unit)) is not None:
                why = (
                    f"minified or one-line file: a line of {wide} characters, more than one review packet can "
                    f"hold (max_packet_tokens {config.max_packet_tokens}); review its source form, or exclude it"
                )
        if why is not None:
            return _row(rel, language, size, 0, sha, "skipped", why, kind), None
        # Counted on the bytes: a newline is never part of a multi-byte UTF-8 sequence nor of a replacement.
        lines = data.count(b"\n") + (data[-1] != 10)
        row = _row(rel, language, size, lines, sha, "review", None, kind, record(st, scoper, rel, read_at))
        threshold, per_chunk = chunk_limits(row, config)
        chunked = lines > threshold
        if not code_map or not (facts or chunked):
            return row, None
        if known is not None and (hit := lookup(known, rel, language, sha, per_chunk if chunked else None)):
            if hit[1] is not None:
                row.__dict__["cuts"] = hit[1]
            return row, hit[0]
        found, cuts = map_file(rel, language, data, per_chunk if chunked else None)
        if cuts:
            row.__dict__["cuts"] = encode_cuts(cuts)
        return row, found if facts else None

    return scan


def _skipped(scoper: Scoper, rel: str, language: str, reason: str, size: int = 0) -> _Scanned:
    return _row(rel, language, size, 0, "", "skipped", reason, scoper.kind(rel, language)), None


def _row(
    path: str,
    language: str,
    size: int,
    line_count: int,
    sha256: str,
    scope: str,
    skip_reason: str | None,
    kind: str,
    stat: str | None = None,
    cuts: str | None = None,
) -> FileRow:
    """``FileRow(...)`` with the same fields in the same order, without the frozen dataclass's ``__init__``,
    which sets each field through ``object.__setattr__`` (a tenth of intake's time per file)."""
    row = object.__new__(FileRow)
    row.__dict__.update(
        path=path,
        language=language,
        size=size,
        line_count=line_count,
        sha256=sha256,
        scope=scope,
        skip_reason=skip_reason,
        kind=kind,
        stat=stat,
        cuts=cuts,
    )
    return row


def _unopened(root: Path, full: str, exc: OSError) -> str:
    """Why a file that could not be opened is skipped (``root`` resolved)."""
    if isinstance(exc, FileNotFoundError):
        return "missing from the working tree (deleted but still tracked)"
    if not Path(full).is_symlink():
        return f"unreadable: {exc.strerror or exc}"
    target = Path(full).resolve()
    real_root = root.resolve()
    if target != real_root and real_root not in target.parents:
        return "symlink that leaves the repository root (not followed)"
    return f"symlink to {target.relative_to(real_root).as_posix()} (the target is reviewed instead)"


def _read_rest(fd: int, first: bytes, limit: int) -> bytes:
    """The file's bytes up to ``limit + 1`` of them, after ``first`` (it may have grown since its size was
    read)."""
    chunks = [first]
    total = len(first)
    # Reads stay small (a large request allocates its whole buffer first, even at the end of the file).
    while total <= limit and (more := os.read(fd, min(1 << 16, limit + 1 - total))):
        chunks.append(more)
        total += len(more)
    return first if len(chunks) == 1 else b"".join(chunks)


# A scanned file as plain values (``marshal`` data from a forked copy): the row's fields, then its map's facts.
_Plain = tuple[str, str, int, int, str, str, str | None, str, str | None, str | None, Facts | str | None]


def _scan_plain(
    root: str, config: SessionConfig, marks: dict[str, Attributes], known: dict[str, Cut] | None, names: Sequence[str]
) -> list[_Plain]:
    """What a copy or the helper of ``scan_parts`` reads of ``names``: the scanner is built again from what
    it is built of (a module-level function and plain arguments, so that a helper can be sent it)."""
    scan = _scanner(Path(root), Scoper(config, marks), code_map=config.code_map, known=known)
    out: list[_Plain] = []
    for rel in names:
        r, facts = scan(rel)
        kind = str(r.kind)  # a FileKind, which marshal does not take
        out.append(
            (r.path, r.language, r.size, r.line_count, r.sha256, r.scope, r.skip_reason, kind, r.stat, r.cuts, facts)
        )
    return out


def _decoder() -> Callable[[_Plain], _Scanned]:
    """What makes a scanned file's plain values a row again (with one string for each of the few
    languages and scopes, as one process shares them, rather than one a row)."""
    shared: dict[str, str] = {}

    def decode(item: _Plain) -> _Scanned:
        path, language, size, line_count, sha, scope, why, kind, stat, cuts, facts = item
        language, scope = shared.setdefault(language, language), shared.setdefault(scope, scope)
        return _row(path, language, size, line_count, sha, scope, why, FileKind(kind), stat, cuts), facts

    return decode


def rescan(root: Path, rel: str, scoper: Scoper) -> FileRow:
    """The manifest row ``rel`` would get now (the file may have changed or gone since intake); ``root``
    resolved by the caller, once for all the files it rescans."""
    return _scanner(root, scoper, code_map=scoper.config.code_map, facts=False)(rel)[0]


# The start of the skip reason of a file the config's include or exclude patterns leave out: such files are
# named in the report with the rule, so no config narrows a "complete" audit without saying so.
LEFT_OUT_BY_CONFIG = "left out by the config"


def _filter(
    paths: list[str], config: SessionConfig, excluded_prefixes: list[str], config_label: str
) -> Iterator[tuple[str, str | None]]:
    """Each path with ``None`` when the config's include and exclude keep it, else the rule that left it out
    (the artifacts folder, ``.git`` and the config file itself are not listed at all)."""
    include = compile_globs(config.include, source=f"include in {config_label}") if config.include else None
    exclude = compile_globs(config.exclude, source=f"exclude in {config_label}") if config.exclude else None
    skip_exact = {CONFIG_FILENAME, *excluded_prefixes}
    skip_under = tuple(p + "/" for p in excluded_prefixes)
    for path in paths:
        if path in skip_exact or path.startswith(skip_under):
            continue
        if include is not None and not include.match(path):
            yield path, f"{LEFT_OUT_BY_CONFIG}: no include pattern of {config_label} matches it"
            continue
        if exclude is not None:
            verdict, index = exclude.decide(path)
            if verdict:
                assert index is not None
                yield path, f"{LEFT_OUT_BY_CONFIG}: exclude pattern {exclude.lines[index]!r} of {config_label}"
                continue
        yield path, None


def build_manifest(
    root: Path,
    artifacts_dir: Path,
    config: SessionConfig,
    config_label: str = "the config",
    cache: FactsCache | None = None,
) -> Manifest:
    """Read the repository under ``root`` into a manifest; never follows links out of it. ``config_label``
    names where ``config`` came from, in the reason of each file its include or exclude leave out. With a
    ``cache``, files whose facts it holds are not parsed, and what was parsed is kept in it to be recorded."""
    if not root.is_dir():
        raise ConfigError(f"the repository root {root} is not a directory; pass --root with an existing folder")
    real_root = root.resolve()
    artifacts_rel: str | None = None
    art = artifacts_dir.resolve()
    if art == real_root or real_root in art.parents:
        artifacts_rel = art.relative_to(real_root).as_posix()
    git = GitReader(real_root)
    top = git.work_tree()
    is_git = top is not None
    paths = git_paths(git) if is_git else walk_paths(real_root)
    excluded = [p for p in (artifacts_rel, ".git") if p]
    filtered = list(_filter(paths, config, excluded, config_label))
    listed = [path for path, why in filtered if why is None]
    marked = top is not None and has_attribute_files(git, top, real_root, listed)
    scoper = Scoper(config, linguist_attributes(git, listed) if marked else {})
    # Each name is either a row decided without reading the file or a name to scan, in manifest order.
    decided: list[FileRow | None] = []
    names: list[str] = []
    seen_names = set(listed)
    for rel, left_out in filtered:
        if left_out is not None:
            language = detect_language(rel)
            decided.append(_row(rel, language, 0, 0, "", "skipped", left_out, scoper.kind(rel, language)))
            continue
        if not rel.isascii() and (shown := _undecodable(rel)) is not None:
            if shown not in seen_names:
                seen_names.add(shown)
                language = detect_language(shown)
                decided.append(_row(shown, language, 0, 0, "", "skipped", _NOT_UTF8, scoper.kind(shown, language)))
            continue
        decided.append(None)
        names.append(rel)
    known = cache.known if cache is not None and cache.known and config.code_map else None  # (none: no look-up)
    scan = _scanner(real_root, scoper, code_map=config.code_map, known=known)
    parts = scan_parts.parts_for(len(names), config.intake_processes)
    # The copies are forked before any thread starts; git's view of HEAD and dirtiness is then read on a
    # thread while this process reads its slice of the files.
    with (
        scan_parts.split(
            names,
            parts,
            functools.partial(_scan_plain, str(real_root), config, dict(scoper.attributes), known),
            _decoder(),
        ) as scanning,
        ThreadPoolExecutor(1) as pool,
    ):
        snapshot = pool.submit(git_snapshot, git, artifacts_rel) if is_git else None
        scanned = [scan(rel) for rel in scanning.mine]
        scanned += scanning.rest()
        head, dirty = snapshot.result() if snapshot is not None else (None, False)
    rows: list[FileRow] = []
    facts: dict[str, Facts] = {}
    take = taker(cache)
    results = iter(scanned)
    for row_or_none in decided:
        if row_or_none is not None:
            rows.append(row_or_none)
            continue
        row, found = next(results)
        rows.append(row)
        if found is not None:
            facts[row.path] = take(row, found)
    in_scope = [r for r in rows if r.scope == "review"]
    code_map = build_map(facts, {r.path for r in in_scope})
    del facts
    digest = hashlib.sha256(
        "\n".join(f"{r.path}\0{r.sha256}\0{r.scope}" for r in rows).encode("utf-8", errors="surrogateescape")
    ).hexdigest()
    return Manifest(
        files=rows,
        code_map=code_map,
        git_head=head,
        git_dirty=dirty,
        digest=digest,
        source="git" if is_git else "walk",
        in_scope=in_scope,
        processes=scanning.processes,
        redone=scanning.redone,
    )
