"""Filesystem primitives: atomic writes and paths confined to a root."""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from types import TracebackType

from audit_mcp.core.errors import PathError


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_derived(path: Path, text: str) -> None:
    """Write a file that is only read after a later commit names it (a packet prompt): plain and fast."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)


class DerivedWriter:
    """Writes derived files on a few threads while the caller goes on (creating files is slow on some
    disks); leaving the ``with`` block waits for every write and re-raises the first error."""

    def __init__(self, workers: int = 4) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="audit-mcp-write")
        self._pending: list[Future[None]] = []

    def write(self, path: Path, text: str) -> None:
        self._pending.append(self._pool.submit(write_derived, path, text))

    def __enter__(self) -> DerivedWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._pool.shutdown(wait=True)
        if kind is None:
            for future in self._pending:
                future.result()


def normalize_relpath(raw: str) -> str:
    """Return a repo-relative POSIX path, refusing absolute paths and ``..`` escapes."""
    text = raw.strip().replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    if not text:
        raise PathError("the path is empty; give a repo-relative path such as 'src/app.py'")
    pure = PurePosixPath(text)
    if pure.is_absolute() or (len(text) > 1 and text[1] == ":"):
        raise PathError(f"'{raw}' is absolute; give the path relative to the repository root")
    if any(part == ".." for part in pure.parts):
        raise PathError(f"'{raw}' escapes the repository root; give a path inside it")
    return str(pure)


def resolve_inside(root: Path, relpath: str) -> Path:
    """Resolve ``relpath`` under ``root``; symlinks that leave the root are refused."""
    rel = normalize_relpath(relpath)
    real_root = root.resolve()
    target = (real_root / rel).resolve()
    if target != real_root and real_root not in target.parents:
        raise PathError(f"'{relpath}' resolves outside the repository root; only files inside it can be used")
    return target


def inside(root: Path, path: Path) -> bool:
    """True when ``path`` (resolved) lies inside ``root`` (resolved)."""
    real_root = root.resolve()
    resolved = path.resolve()
    return resolved == real_root or real_root in resolved.parents
