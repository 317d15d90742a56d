"""Progress of long work (intake, planning, packing, merging, the report), for whoever is watching.

The engine calls a ``Progress`` function with a count that only grows, an
optional total and a short message. The MCP server turns the calls into
progress notifications and log messages; the CLI draws a line on a terminal
(``surfaces.terminal``) and says nothing when its stderr is piped.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[float, float | None, str], None]


def tell(progress: Progress | None, done: float, total: float | None, message: str) -> None:
    if progress is not None:
        progress(done, total, message)
