"""Intake's scan in parts: on a large repository, copies of this process read contiguous slices of its files
beside the caller, which reads the first slice, so the per-file work runs on several cores.

A copy is forked only where that is safe: on Linux, from a process with a single thread (the command line,
the headless runner). The MCP server runs its tools on worker threads, so it forks one **helper** when it
starts, while it still has one thread (``start_helper``); at intake the server hands the helper every slice
but its own, and the helper, single-threaded, forks copies of its own for them as the command line does.
Anywhere else, and for a repository too small to gain from it, the caller reads every file itself.

Results come back as ``marshal`` data (plain values, no objects or code), framed by their length. A copy
leaves with ``os._exit``, running none of the caller's clean-up. A copy or a helper that fails, dies or
sends back anything but one result per file has that slice read again by the caller, so a split scan never
loses a file and gives the same manifest as one process.
"""

from __future__ import annotations

import marshal
import os
import pickle
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from audit_mcp.engine.scan_frames import Decode, frame, read_frame, read_results, result_frames

# Below this many files a part, forking a copy costs about what its slice saves. Before the code map, two parts
# of 2,500 files took as long as one process through the server; reading a file now also parses it for the
# map (about six times the work a file), so a part of 1,000 files already gains.
MIN_FILES_PER_PART = 1_000
# With no ``intake_processes`` set: at most this many parts (the read itself, not the checks, then binds).
MAX_AUTO_PARTS = 4

# A slice's work: the names in, one marshal-able result per name out, in order. A helper receives it
# pickled, so what is handed to ``split`` is a module-level function or a partial of one.
Work = Callable[[Sequence[str]], list[Any]]


def available_cores() -> int:
    """The cores this process may run on (its affinity where the platform says, else the machine's)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return max(1, len(affinity(0)))
    return max(1, os.cpu_count() or 1)


def parts_for(files: int, configured: int | None, cores: int | None = None) -> int:
    """How many parts to scan ``files`` files in: ``configured`` (``intake_processes``) when set, capped at
    one file a part and at the cores (``MAX_AUTO_PARTS`` where there are fewer: a repository's own config is
    untrusted, and may not have intake fork a copy per file); else one a core, at most ``MAX_AUTO_PARTS``,
    each of at least ``MIN_FILES_PER_PART``."""
    cores = available_cores() if cores is None else cores
    if configured is not None:
        return max(1, min(configured, files, max(cores, MAX_AUTO_PARTS)))
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


def _kill(pid: int) -> None:
    with suppress(ProcessLookupError):  # it has exited already: waitpid reaps it
        os.kill(pid, signal.SIGKILL)


@dataclass
class _Copy:
    """A forked copy at work on ``names``, its results to come through the pipe ``fd``."""

    pid: int
    fd: int
    names: Sequence[str]
    reaped: bool = False

    def collect(self, decode: Decode) -> tuple[list[Any] | None, str]:
        try:
            with open(self.fd, "rb", buffering=0, closefd=True) as pipe:
                got, why = read_results(pipe.readinto, self.names, decode)
        except OSError as exc:
            _kill(self.pid)
            return None, f"reading its results failed ({exc.strerror or exc})"
        finally:
            _, status = os.waitpid(self.pid, 0)
            self.reaped = True
        if (code := os.waitstatus_to_exitcode(status)) != 0:  # what it sent, if anything, is not trusted
            return None, f"the copy scanning it exited with {code}"
        return got, why

    def abandon(self) -> None:
        if not self.reaped:
            _kill(self.pid)
            os.close(self.fd)
            os.waitpid(self.pid, 0)
            self.reaped = True


def _fork(names: Sequence[str], work: Work) -> _Copy:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the copy: scan, send, and leave without running anything of the caller's
        status = 1
        try:
            os.close(read_end)
            with open(write_end, "wb", closefd=True) as pipe:
                for chunk in result_frames(work(names)):
                    pipe.write(chunk)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    return _Copy(pid, read_end, names)


@dataclass
class _Job:
    """Slices handed to the helper: ``names``, in ``parts`` parts of the helper's own."""

    helper: Helper
    names: Sequence[str]
    processes: int = 0  # how many processes the helper read them with, once it answered
    notes: list[str] = field(default_factory=list)  # the helper's own notes of slices read again
    done: bool = False

    def collect(self, decode: Decode) -> tuple[list[Any] | None, str]:
        self.done = True
        got, why, self.processes, self.notes = self.helper.answer(self.names, decode)
        return got, why

    def abandon(self) -> None:
        if not self.done:
            self.collect(lambda item: None)  # its answer is read and dropped: the next request starts clean


class Helper:
    """A copy of the server forked while it had one thread, which reads slices of files for it at intake.

    One request at a time: a second intake while the helper is busy reads its files itself."""

    def __init__(self, pid: int, channel: socket.socket) -> None:
        self.pid = pid
        self.channel = channel
        self.alive = True
        self._busy = threading.Lock()

    def ask(self, work: Work, names: Sequence[str], parts: int) -> bool:
        """Send a request; ``False`` when the helper is busy or gone (the caller then reads ``names``)."""
        if not self.alive or not self._busy.acquire(blocking=False):
            return False
        try:
            request = pickle.dumps((work, list(names), parts), pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, AttributeError, TypeError):  # work that cannot be sent: read here
            self._busy.release()
            return False
        try:
            self.channel.sendall(frame(request))
        except OSError:
            self._lost()
            self._busy.release()
            return False
        return True

    def answer(self, names: Sequence[str], decode: Decode) -> tuple[list[Any] | None, str, int, list[str]]:
        """The answer to the request sent: the results of ``names`` (each decoded) or ``None`` and why, how
        many processes read them, and the helper's own notes of slices it read again."""
        try:
            return self._read_answer(names, decode)
        finally:
            self._busy.release()

    def _read_answer(self, names: Sequence[str], decode: Decode) -> tuple[list[Any] | None, str, int, list[str]]:
        lost: tuple[list[Any] | None, str, int, list[str]] = (None, "the intake helper did not answer", 0, [])
        try:
            head = read_frame(self.channel.recv_into)
            if head is None:
                self._lost()
                return lost
            processes, notes = marshal.loads(head)
            got, why = read_results(self.channel.recv_into, names, decode)
        except (OSError, EOFError, ValueError, TypeError):
            self._lost()
            return lost
        if got is None:
            # Out of step or wrong: what is left of this answer would be read as the start of the next one.
            self._lost()
        return got, why, int(processes), [str(n) for n in notes]

    def _lost(self) -> None:
        """The helper is gone or out of step: it is stopped, and intake reads in one process from now on."""
        if self.alive:
            self.alive = False
            self.channel.close()
            _kill(self.pid)
            os.waitpid(self.pid, 0)

    def stop(self) -> None:
        self._lost()


_helper: Helper | None = None


def start_helper() -> Helper | None:
    """Fork the helper, if this process may fork (call it before any thread starts); it leaves when this
    process closes its end of the channel, at exit at the latest. ``None`` where nothing was forked."""
    global _helper
    if _helper is not None and _helper.alive:
        return _helper
    if not can_fork():
        return None
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            ours.close()
            _quiet()
            _serve(theirs)
            status = 0
        finally:
            os._exit(status)
    theirs.close()
    _helper = Helper(pid, ours)
    return _helper


def stop_helper() -> None:
    global _helper
    if _helper is not None:
        _helper.stop()
        _helper = None


def _quiet() -> None:
    """The helper's standard streams on the null device: a stdio server's channel is its parent's alone."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _serve(channel: socket.socket) -> None:
    """The helper's loop: a request in, its slices read (in parts of its own), the answer out."""
    while (request := read_frame(channel.recv_into)) is not None:
        work, names, parts = pickle.loads(request)
        with split(names, parts, work, _plain) as scanning:
            results = work(scanning.mine) + scanning.rest()
        channel.sendall(frame(marshal.dumps((scanning.processes, scanning.redone))))
        for chunk in result_frames(results):
            channel.sendall(chunk)


def _plain(item: Any) -> Any:
    return item


@dataclass
class Split:
    """A scan under way: ``mine`` is the caller's slice; ``rest`` waits for the other slices."""

    mine: Sequence[str]
    work: Work
    decode: Decode
    # Every slice but the caller's, in order: a copy or the helper at work on it, or the names themselves
    # when no copy could be forked for them (the caller reads those in ``rest``).
    others: list[_Copy | _Job | Sequence[str]] = field(default_factory=list)
    # Why a slice was read by the caller after all (empty when every copy came back whole).
    redone: list[str] = field(default_factory=list)

    @property
    def processes(self) -> int:
        """This one, the copies forked beside it, and those the helper read with."""
        count = 1
        for part in self.others:
            if isinstance(part, _Copy):
                count += 1
            elif isinstance(part, _Job):
                count += part.processes
        return count

    def rest(self) -> list[Any]:
        """The results of every slice but the caller's, in order: each copy's, or the slice read here when
        its copy did not come back whole (or was never forked)."""
        out: list[Any] = []
        for part in self.others:
            if isinstance(part, Sequence):  # no copy could be forked for these (``redone`` says why)
                out += [self.decode(item) for item in self.work(part)]
                continue
            got, why = part.collect(self.decode)
            if isinstance(part, _Job):
                self.redone += part.notes
            if got is None:
                self.redone.append(f"{len(part.names)} file(s) read again in the main process: {why}")
                got = [self.decode(item) for item in self.work(part.names)]
            out += got
        return out

    def abandon(self) -> None:
        for part in self.others:
            if not isinstance(part, Sequence):
                part.abandon()


@contextmanager
def split(names: Sequence[str], parts: int, work: Work, decode: Decode) -> Iterator[Split]:
    """Start scanning ``names`` in ``parts`` parts: every slice but the first in a forked copy that runs
    ``work`` on it (when ``can_fork``), or handed to the helper (when there is one); else the caller's
    slice is every name. Copies are forked here, before the caller starts any thread; on leaving the block
    early, copies not yet collected are killed and reaped, and the helper's answer is read and dropped."""
    if parts < 2 or len(names) < 2:
        yield Split(names, work, decode)
        return
    pieces = slices(names, parts)
    running = Split(pieces[0], work, decode)
    rest = names[len(pieces[0]) :]
    if not can_fork():
        helper = _helper
        if helper is None or not helper.ask(work, rest, parts - 1):
            yield Split(names, work, decode)
            return
        running.others.append(_Job(helper, rest))
    else:
        for n, piece in enumerate(pieces[1:], 1):
            try:
                running.others.append(_fork(piece, work))
            except OSError as exc:  # out of processes or memory: the caller reads what is left
                left = names[len(names) - sum(map(len, pieces[n:])) :]
                running.others.append(left)
                running.redone.append(
                    f"{len(left)} file(s) read in the main process: forking a copy failed ({exc.strerror or exc})"
                )
                break
    try:
        yield running
    finally:
        running.abandon()
