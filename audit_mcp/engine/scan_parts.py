"""Intake's scan in parts: on a large repository, forked copies of this process read contiguous slices of
its files beside the caller, which reads the first slice, so the per-file work runs on several cores.

Forking is done only where it is safe and cheap: on Linux, from a process with a single thread (the command
line, the headless runner; not the MCP server, whose tools run on worker threads beside its event loop).
Anywhere else, and for a repository too small to gain from it, the caller reads every file itself. A copy
sends back its slice's results as ``marshal`` data (plain values, no objects or code) and leaves with
``os._exit``, running none of the caller's clean-up; a copy that fails, dies or sends back anything but
one result per file of its slice has that slice read again by the caller, so a split scan never loses a
file and gives the same manifest as one process.
"""

from __future__ import annotations

import marshal
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

# Below this many files a part, forking a copy costs more than its slice saves.
MIN_FILES_PER_PART = 1_000
# With no ``intake_processes`` set: at most this many parts (the read itself, not the checks, then binds).
MAX_AUTO_PARTS = 4

Work = Callable[[Sequence[str]], list[Any]]


def available_cores() -> int:
    """The cores this process may run on (its affinity where the platform says, else the machine's)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return max(1, len(affinity(0)))
    return max(1, os.cpu_count() or 1)


def parts_for(files: int, configured: int | None, cores: int | None = None) -> int:
    """How many parts to scan ``files`` files in: ``configured`` (``intake_processes``) when set, capped at
    one file a part; else one a core, at most ``MAX_AUTO_PARTS``, each of at least ``MIN_FILES_PER_PART``."""
    if configured is not None:
        return max(1, min(configured, files))
    cores = available_cores() if cores is None else cores
    return max(1, min(cores, MAX_AUTO_PARTS, files // MIN_FILES_PER_PART))


def can_fork() -> bool:
    """Whether a copy of this process may be forked safely: Linux (elsewhere system libraries are not safe
    to use in a forked child) and no thread but this one (a lock another thread held would stay held)."""
    return sys.platform.startswith("linux") and hasattr(os, "fork") and threading.active_count() == 1


def slices(names: Sequence[str], parts: int) -> list[Sequence[str]]:
    """``names`` in ``parts`` contiguous slices of near-equal length, in order."""
    size, extra = divmod(len(names), parts)
    out: list[Sequence[str]] = []
    start = 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(names[start:end])
        start = end
    return out


@dataclass
class _Copy:
    pid: int
    fd: int
    names: Sequence[str]
    reaped: bool = False


@dataclass
class Split:
    """A scan under way: ``mine`` is the caller's slice; ``rest`` waits for the copies' slices."""

    mine: Sequence[str]
    work: Work
    # Every slice but the caller's, in order: a copy at work on it, or the names themselves when no copy
    # could be forked for them (the caller reads those in ``rest``).
    others: list[_Copy | Sequence[str]] = field(default_factory=list)
    # Why a slice was read by the caller after all (empty when every copy came back whole).
    redone: list[str] = field(default_factory=list)

    @property
    def processes(self) -> int:
        """This one and the copies forked beside it."""
        return 1 + len(self.copies)

    @property
    def copies(self) -> list[_Copy]:
        return [part for part in self.others if isinstance(part, _Copy)]

    def rest(self) -> list[Any]:
        """The results of every slice but the caller's, in order: each copy's, or the slice read here when
        its copy did not come back whole (or was never forked)."""
        out: list[Any] = []
        for part in self.others:
            if not isinstance(part, _Copy):
                out += self.work(part)  # no copy could be forked for these (``redone`` says why)
                continue
            got, why = _collect(part)
            if got is None:
                self.redone.append(f"{len(part.names)} file(s) read here after all: {why}")
                got = self.work(part.names)
            out += got
        return out

    def _abandon(self) -> None:
        for copy in self.copies:
            if not copy.reaped:
                _kill(copy.pid)
                os.close(copy.fd)
                os.waitpid(copy.pid, 0)
                copy.reaped = True


def _collect(copy: _Copy) -> tuple[list[Any] | None, str]:
    chunks: list[bytes] = []
    try:
        while chunk := os.read(copy.fd, 1 << 20):
            chunks.append(chunk)
    except OSError as exc:
        _kill(copy.pid)
        why = f"reading its results failed ({exc.strerror or exc})"
    else:
        why = ""
    finally:
        os.close(copy.fd)
        _, status = os.waitpid(copy.pid, 0)
        copy.reaped = True
    if why:
        return None, why
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        return None, f"the copy scanning it exited with {code}"
    try:
        got = marshal.loads(b"".join(chunks))
    except (EOFError, ValueError, TypeError) as exc:
        return None, f"its results were cut short ({exc})"
    if not isinstance(got, list) or len(got) != len(copy.names):
        return None, "its results did not hold one entry per file"
    return got, ""


def _kill(pid: int) -> None:
    with suppress(ProcessLookupError):  # it has exited already: waitpid reaps it
        os.kill(pid, signal.SIGKILL)


def _fork(names: Sequence[str], work: Work) -> _Copy:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: scan, send, and leave without running anything of the caller's
        status = 1
        try:
            os.close(read_end)
            data = marshal.dumps(work(names))
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view) :]
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    return _Copy(pid, read_end, names)


@contextmanager
def split(names: Sequence[str], parts: int, work: Work) -> Iterator[Split]:
    """Start scanning ``names`` in ``parts`` parts: every slice but the first in a forked copy that runs
    ``work`` on it (when ``can_fork``; else the caller's slice is every name). The copies are forked here,
    before the caller starts any thread; on leaving the block early, copies not yet collected are killed
    and reaped."""
    if parts < 2 or len(names) < 2 or not can_fork():
        yield Split(names, work)
        return
    pieces = slices(names, parts)
    running = Split(pieces[0], work)
    try:
        for n, piece in enumerate(pieces[1:], 1):
            try:
                running.others.append(_fork(piece, work))
            except OSError as exc:  # out of processes or memory: the caller reads what is left
                left = names[len(names) - sum(map(len, pieces[n:])) :]
                running.others.append(left)
                running.redone.append(f"{len(left)} file(s) read here: forking a copy failed ({exc.strerror or exc})")
                break
        yield running
    finally:
        running._abandon()
