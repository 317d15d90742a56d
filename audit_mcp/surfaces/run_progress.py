"""Where ``audit-mcp run`` stands, for the person watching: "N of M packets, elapsed, about T left, K failed".

``RunProgress`` counts the packets this invocation finished and failed against those the audit's forecast
says remain (``usecases.audit_forecast``; the count is taken again at each run, so work that failed and
went back to the queue, and verifications once they are known, are counted), and says how long is left: from
the pace so far once a packet has finished, from the forecast's time range before. ``StderrLines`` writes
the runner's event lines and the progress line to stderr: on a terminal the progress line stays under the
events and is redrawn in place; elsewhere (a CI log) it is a line of its own after each event that moves it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from audit_mcp.core.escape import terminal

_CLEAR = "\r\x1b[K"


def duration(seconds: float) -> str:
    """``45s``, ``3m 12s``, ``1h 05m``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {(whole % 3600) // 60:02d}m"


class RunProgress:
    """Packets finished and failed in this invocation, against the packets the audit still needs."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started = clock()
        self.first_launch: float | None = None
        self.done = 0
        self.failed = 0
        self.remaining = 0  # packets the forecast says are left, as last counted (those running included)
        self.counted_at = 0  # packets finished or failed when it was counted
        self.forecast_range = ""  # the forecast's time range, in words ("about 7 min to 28 min")

    def expect(self, forecast: Mapping[str, Any]) -> None:
        """What the audit's forecast says remains now (its ``packets`` and time range)."""
        self.remaining = int(forecast.get("packets") or 0)
        self.counted_at = self.done + self.failed
        self.forecast_range = str(forecast.get("time_range") or "")

    def launched(self) -> None:
        if self.first_launch is None:
            self.first_launch = self.clock()

    def finished(self, ok: bool) -> None:
        if ok:
            self.done += 1
        else:
            self.failed += 1

    @property
    def total(self) -> int:
        """Every packet of this invocation: those finished or failed, and those the forecast says remain."""
        return max(self.counted_at + self.remaining, self.done + self.failed)

    def line(self) -> str:
        elapsed = self.clock() - self.started
        left = self.total - self.done - self.failed
        return (
            f"{self.done} of {self.total} packets, {duration(elapsed)} elapsed, {self._left(left)}, "
            f"{self.failed} failed"
        )

    def _left(self, left: int) -> str:
        if left <= 0:
            return "nothing left"
        finished = self.done + self.failed
        if finished and self.first_launch is not None:
            pace = (self.clock() - self.first_launch) / finished
            return f"about {duration(pace * left)} left"
        return f"{self.forecast_range} left (forecast)" if self.forecast_range else "time left unknown"

    def final(self, outcome: str) -> str:
        return (
            f"{outcome}: {self.done} of {self.total} packets done in {duration(self.clock() - self.started)}, "
            f"{self.failed} failed"
        )


class StderrLines:
    """Event lines and a progress line, on a stream (stderr) that may be a terminal."""

    def __init__(self, stream: TextIO, prefix: str = "audit-mcp: ") -> None:
        self.stream = stream
        self.prefix = prefix
        self.tty = stream.isatty()
        self._progress = ""

    def say(self, line: str) -> None:
        text = f"{self.prefix}{terminal(line)}\n"
        if self.tty and self._progress:
            text = _CLEAR + text + self._progress  # the event above, the progress line redrawn under it
        self.stream.write(text)
        self.stream.flush()

    def progress(self, line: str) -> None:
        shown = f"{self.prefix}progress: {terminal(line)}"
        if self.tty:
            self._progress = shown
            self.stream.write(_CLEAR + shown)
        else:
            self.stream.write(shown + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the progress line (on a terminal it is left in place, with its line ended)."""
        if self.tty and self._progress:
            self.stream.write("\n")
            self.stream.flush()
        self._progress = ""
