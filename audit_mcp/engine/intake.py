"""Intake: the repository manifest — every file in scope, and every file skipped with a reason."""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import posixpath
import re
import stat
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from audit_mcp.core.config import CONFIG_FILENAME, SessionConfig
from audit_mcp.core.errors import ConfigError
from audit_mcp.engine import attributes, file_stat
from audit_mcp.engine.attributes import Attributes
from audit_mcp.engine.coverage import max_unit_chars
from audit_mcp.engine.git import GitReader, paths_of
from audit_mcp.engine.ignores import walk_paths
from audit_mcp.engine.imports import ImportResolver, import_candidates, reads_imports
from audit_mcp.engine.incremental import changed_since
from audit_mcp.engine.languages import detect_language
from audit_mcp.engine.scoping import Scoper
from audit_mcp.store.records import FileRow

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_OPEN_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


@dataclass(frozen=True)
class Manifest:
    files: list[FileRow]
    edges: list[tuple[str, str]]
    git_head: str | None
    git_dirty: bool
    digest: str
    source: str  # "git" or "walk"
    in_scope: list[FileRow] = field(default_factory=list)


def _git_paths(git: GitReader) -> list[str]:
    listing = git.require(
        "list the files of the repository with git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"
    )
    return sorted(set(paths_of(listing)))


def _git_snapshot(git: GitReader, artifacts_rel: str | None) -> tuple[str | None, bool]:
    head = git.run("rev-parse", "--verify", "--quiet", "HEAD")
    head_sha = head.stdout.decode().strip() if head is not None and head.returncode == 0 else None
    status = git.run("status", "--porcelain", "-z", "--ignore-submodules=all")
    dirty = False
    if status is not None and status.returncode == 0:
        for entry in status.stdout.split(b"\0"):
            path = entry[3:].decode(errors="replace")
            if not entry or (artifacts_rel and path.startswith(artifacts_rel)):
                continue
            if path == CONFIG_FILENAME:
                continue
            dirty = True
            break
    return head_sha, dirty


def linguist_attributes(git: GitReader, paths: list[str]) -> dict[str, Attributes]:
    """The linguist marks the repository's ``.gitattributes`` give ``paths`` (none outside a work tree)."""
    marks: dict[str, Attributes] = {}
    for batch in attributes.batches(paths):
        output = git.require("read the .gitattributes of the repository", *attributes.check_attr_args(), *batch)
        marks.update(attributes.parse(output))
    return marks


_NOT_UTF8 = "the file name is not UTF-8 (shown with \\x escapes); rename the file to have it reviewed"


def _undecodable(rel: str) -> str | None:
    """The printable form of a path whose name is not UTF-8 (git and the walk decode it with surrogate
    escapes, which nothing downstream can store or print), or ``None`` for a normal name."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return None


def _has_attribute_files(git: GitReader, top: Path, root: Path, paths: list[str]) -> bool:
    """Whether any attributes file can apply to ``paths``: a ``.gitattributes`` in a directory holding one
    of them or above it (up to the work tree's top), or the repository's ``info/attributes``. Without one,
    every mark is unspecified and ``git check-attr`` over every path is skipped (the system and global
    attribute files are off in the hardened environment)."""
    dirs = {""}
    for path in paths:
        folder = posixpath.dirname(path)
        while folder not in dirs:
            dirs.add(folder)
            folder = posixpath.dirname(folder)
    above = [p for p in root.parents if p == top or top in p.parents]  # between the root and the top
    if any(
        os.path.lexists(f"{root}{os.sep}{d}{os.sep}.gitattributes" if d else f"{root}{os.sep}.gitattributes")
        for d in dirs
    ):
        return True
    if any(os.path.lexists(folder / ".gitattributes") for folder in above):
        return True
    proc = git.run("rev-parse", "--git-path", "info/attributes")
    if proc is None or proc.returncode != 0:
        return True  # cannot tell: ask git for every path
    named = proc.stdout.decode("utf-8", errors="surrogateescape").strip()
    return os.path.lexists(root / named)  # an absolute path stays absolute


def repository_attributes(root: Path, paths: list[str]) -> dict[str, Attributes]:
    """``linguist_attributes`` for a root that may or may not be a git work tree."""
    real_root = root.resolve()
    git = GitReader(real_root)
    top = git.work_tree() if paths else None
    if top is None or not _has_attribute_files(git, top, real_root, paths):
        return {}
    return linguist_attributes(git, paths)


def _scan_file(root: Path, rel: str, scoper: Scoper, *, imports: bool = True) -> tuple[FileRow, list[str] | None]:
    """One manifest row, and what the file names as imports when it is in scope (unresolved; read only
    when ``imports``). ``root`` is already resolved."""
    config = scoper.config
    language = detect_language(rel)
    full = f"{root}{os.sep}{rel}"  # a plain string: this runs once per file of the repository

    def skipped(reason: str, size: int = 0, sha: str = "", lines: int = 0) -> tuple[FileRow, None]:
        return FileRow(rel, language, size, lines, sha, "skipped", reason, scoper.kind(rel, language)), None

    read_at = time.time_ns()
    try:
        if not _NOFOLLOW and Path(full).is_symlink():
            raise OSError(errno.ELOOP, "symbolic link")
        # O_NOFOLLOW: a symlink is never followed here (ELOOP sends it to the check below), even one swapped
        # in after listing; O_NONBLOCK: opening a FIFO does not wait for a writer.
        fd = os.open(full, _OPEN_FLAGS)
    except FileNotFoundError:
        return skipped("missing from the working tree (deleted but still tracked)")
    except OSError as exc:
        if not Path(full).is_symlink():
            return skipped(f"unreadable: {exc.strerror or exc}")
        target = Path(full).resolve()
        real_root = root.resolve()
        if target != real_root and real_root not in target.parents:
            return skipped("symlink that leaves the repository root (not followed)")
        return skipped(f"symlink to {target.relative_to(real_root).as_posix()} (the target is reviewed instead)")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return skipped("not a regular file")
        if st.st_size > config.max_file_bytes:
            return skipped(
                f"oversize: {st.st_size} bytes > max_file_bytes {config.max_file_bytes} (raise it in the config)",
                st.st_size,
            )
        data = _read_all(fd, st.st_size, config.max_file_bytes)
    except OSError as exc:
        return skipped(f"unreadable: {exc.strerror or exc}")
    finally:
        os.close(fd)
    if len(data) > config.max_file_bytes:
        return skipped(
            f"oversize: more than max_file_bytes {config.max_file_bytes} (raise it in the config)", len(data)
        )
    if data[:2] == b"#!":  # a file its name says nothing about may have a shebang (nothing else changes)
        language = detect_language(rel, data[:256])
    kind = scoper.kind(rel, language)
    reason = scoper.by_path(rel, kind)
    sha = hashlib.sha256(data).hexdigest()
    if reason:
        return skipped(reason, len(data), sha)
    if data.find(b"\0", 0, 8192) != -1:
        return skipped("binary file", len(data), sha)
    if not data or data.isspace():
        return skipped("empty file", len(data), sha)
    if reason := scoper.by_header(rel, data):
        return skipped(reason, len(data), sha)
    if (wide := _wide_line(data, max_unit_chars(language, config))) is not None:
        return skipped(
            f"minified or one-line file: a line of {wide} characters, more than one review packet can hold "
            f"(max_packet_tokens {config.max_packet_tokens}); review its source form, or exclude it",
            len(data),
            sha,
        )
    # Counted on the bytes: a newline is never part of a multi-byte UTF-8 sequence nor of a replacement.
    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    named = import_candidates(rel, language, data) if imports and reads_imports(language) else []
    proof = file_stat.record(st, scoper, rel, read_at)
    return FileRow(rel, language, len(data), lines, sha, "review", None, kind, proof), named


def _wide_line(data: bytes, limit: int) -> int | None:
    """The length of the longest line when one is over ``limit`` characters (a packet holds whole lines, so
    such a file cannot be chunked to fit), else ``None``; cheap for the files that cannot have one."""
    if len(data) <= limit or _over(limit).search(b"\n" + data) is None:
        return None
    return max(len(line) for line in data.split(b"\n"))


@functools.lru_cache(maxsize=64)
def _over(limit: int) -> re.Pattern[bytes]:
    """A line of more than ``limit`` characters, from the newline before it. The leading newline is a
    literal the regex engine skips to, so each line is tried once: without it every position of every line
    is a start, and a large file of ordinary lines costs its size times its line length (34 times slower
    on a real source tree)."""
    return re.compile(rb"\n[^\n]{%d}" % (limit + 1))


def _read_all(fd: int, size: int, limit: int) -> bytes:
    """The file's bytes up to ``limit + 1`` of them (it may have grown since its size was read)."""
    chunks = [os.read(fd, min(size, limit) + 1)]
    total = len(chunks[0])
    # Reads stay small (a large request allocates its whole buffer first, even at the end of the file).
    while total <= limit and (more := os.read(fd, min(1 << 16, limit + 1 - total))):
        chunks.append(more)
        total += len(more)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def rescan(root: Path, rel: str, scoper: Scoper) -> FileRow:
    """The manifest row ``rel`` would get now (the file may have changed or gone since intake); ``root``
    resolved by the caller, once for all the files it rescans."""
    return _scan_file(root, rel, scoper, imports=False)[0]


def _filter(paths: list[str], config: SessionConfig, excluded_prefixes: list[str]) -> Iterator[str]:
    include = pathspec.GitIgnoreSpec.from_lines(config.include) if config.include else None
    exclude = pathspec.GitIgnoreSpec.from_lines(config.exclude) if config.exclude else None
    skip_exact = {CONFIG_FILENAME, *excluded_prefixes}
    skip_under = tuple(p + "/" for p in excluded_prefixes)
    for path in paths:
        if path in skip_exact or path.startswith(skip_under):
            continue
        if include is not None and not include.match_file(path):
            continue
        if exclude is not None and exclude.match_file(path):
            continue
        yield path


def build_manifest(root: Path, artifacts_dir: Path, config: SessionConfig) -> Manifest:
    """Read the repository under ``root`` into a manifest; never follows links out of it."""
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
    paths = _git_paths(git) if is_git else walk_paths(real_root)
    excluded = [p for p in (artifacts_rel, ".git") if p]
    changed = changed_since(git if is_git else None, real_root, config.since) if config.since else None
    listed = list(_filter(paths, config, excluded))
    marked = top is not None and _has_attribute_files(git, top, real_root, listed)
    scoper = Scoper(config, linguist_attributes(git, listed) if marked else {})
    # git's view of HEAD and dirtiness is read on a thread while this one reads the files.
    with ThreadPoolExecutor(1) as pool:
        snapshot = pool.submit(_git_snapshot, git, artifacts_rel) if is_git else None
        rows: list[FileRow] = []
        imports: dict[str, list[str]] = {}
        seen_names = set(listed)
        for rel in listed:
            if (shown := _undecodable(rel)) is not None:
                if shown not in seen_names:
                    seen_names.add(shown)
                    language = detect_language(shown)
                    rows.append(FileRow(shown, language, 0, 0, "", "skipped", _NOT_UTF8, scoper.kind(shown, language)))
                continue
            if changed is not None and rel not in changed:
                language = detect_language(rel)
                reason = f"unchanged since {config.since}"
                rows.append(FileRow(rel, language, 0, 0, "", "skipped", reason, scoper.kind(rel, language)))
                continue
            row, named = _scan_file(real_root, rel, scoper)
            rows.append(row)
            if named is not None:
                imports[rel] = named
        languages = {r.path: r.language for r in rows if r.scope == "review"}
        resolver = ImportResolver(imports)
        edges = sorted(
            (path, target)
            for path, named in imports.items()
            if named
            for target in resolver.resolve(path, languages[path], named)
        )
        head, dirty = snapshot.result() if snapshot is not None else (None, False)
    digest = hashlib.sha256(
        "\n".join(f"{r.path}\0{r.sha256}\0{r.scope}" for r in rows).encode("utf-8", errors="surrogateescape")
    ).hexdigest()
    return Manifest(
        files=rows,
        edges=edges,
        git_head=head,
        git_dirty=dirty,
        digest=digest,
        source="git" if is_git else "walk",
        in_scope=[r for r in rows if r.scope == "review"],
    )
