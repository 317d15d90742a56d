"""Filesystem primitives: atomic writes, paths confined to a root, and bounded reads of files named from outside.

Text is written as UTF-8 with any unencodable character (a lone surrogate from a file name that is not
UTF-8) written as a backslash escape: a stray character in a name never stops a file from being written.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import TYPE_CHECKING

from audit_mcp.core.errors import PathError

if TYPE_CHECKING:
    from concurrent.futures import Future


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="\n") as handle:
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
    with path.open("w", encoding="utf-8", errors="backslashreplace", newline="\n") as handle:
        handle.write(text)


class DerivedWriter:
    """Writes derived files on a few threads while the caller goes on (creating files is slow on some
    disks); leaving the ``with`` block waits for every write and re-raises the first error."""

    def __init__(self, workers: int = 4) -> None:
        # Loaded by those that write prompts: the views and a submission read files, and the thread pool's
        # module (with the logging it loads) is not theirs to pay for.
        from concurrent.futures import ThreadPoolExecutor

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


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def read_confined(root: Path, relpath: str, cap: int) -> bytes:
    """The bytes of a file the repository names: inside ``root``, a regular file, at most ``cap`` bytes.

    A symlink is resolved first and must stay inside the root; the open never follows a link swapped in
    afterwards and never waits (a FIFO is refused, not read). Raises ``PathError`` saying which rule failed.
    """
    target = resolve_inside(root, relpath)
    return _read(target, cap, relpath, regular_only=True, flags=_NOFOLLOW | _NONBLOCK)


def read_head(root: Path, relpath: str, cap: int) -> bytes:
    """The first ``cap`` bytes of a regular file inside ``root`` (a longer file is cut, not refused), with the
    same confinement as ``read_confined``."""
    target = resolve_inside(root, relpath)
    return _read(target, cap, relpath, regular_only=True, flags=_NOFOLLOW | _NONBLOCK, cut=True)


def read_regular(path: Path, cap: int) -> bytes:
    """The bytes of a file someone else may have put there: a regular file (no link, no FIFO), capped."""
    return _read(path, cap, str(path), regular_only=True, flags=_NOFOLLOW | _NONBLOCK)


def read_capped(path: Path, cap: int) -> bytes:
    """The bytes of a file the user named (any place, a pipe included), refused past ``cap`` bytes."""
    return _read(path, cap, str(path), regular_only=False, flags=0)


def _read(path: Path, cap: int, label: str, *, regular_only: bool, flags: int, cut: bool = False) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | flags | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise PathError(f"cannot open '{label}': {exc.strerror or exc}") from exc
    try:
        st = os.fstat(fd)
        if regular_only and not stat.S_ISREG(st.st_mode):
            raise PathError(f"'{label}' is not a regular file; only regular files inside the repository are read")
        if stat.S_ISREG(st.st_mode) and st.st_size > cap and not cut:
            raise PathError(f"'{label}' is {st.st_size} bytes; the limit is {cap}")
        if flags & _NONBLOCK:
            os.set_blocking(fd, True)
        chunks: list[bytes] = []
        total = 0
        while total <= cap and (chunk := os.read(fd, min(1 << 20, cap + 1 - total))):
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise PathError(f"cannot read '{label}': {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if total > cap and not cut:
        raise PathError(f"'{label}' is over {cap} bytes; the limit is {cap}")
    return b"".join(chunks)[:cap]
