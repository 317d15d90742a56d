"""The cycle collector held off while one bulk step builds its objects.

CPython frees almost everything by reference counting; its cycle collector exists for reference cycles,
and it runs whenever allocations outnumber deallocations by a threshold. A step that builds a manifest
of tens of thousands of rows, a coverage matrix or a run of packets allocates far more than it frees, so
the collector runs hundreds of times over objects that are all still alive, for about a tenth of the
step's time and nothing found. ``paused()`` holds it off for the length of such a step; the cycles the
step left behind are collected by the first collection after it, as they would have been.

Nested and concurrent steps (the server may run tool calls on several threads) share one count: the
collector resumes when the last of them ends, and only if it was running when the first began (a program
that embeds the service and turned it off keeps it off).
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()
_holders = 0
_resume = False


@contextmanager
def paused() -> Iterator[None]:
    """Hold the cycle collector off until the block (and every other holder) ends."""
    global _holders, _resume
    with _lock:
        if _holders == 0:
            _resume = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _resume:
                gc.enable()


def held(step: Callable[P, R]) -> Callable[P, R]:
    """``step`` run with the collector paused (a use case whose work grows with the repository)."""

    @functools.wraps(step)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with paused():
            return step(*args, **kwargs)

    return run
