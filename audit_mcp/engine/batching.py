"""The head of the review queue: only as many pending cells as one run can hold go to the packer.

A run holds at most ``max_packets_per_run`` packets, and the packer takes files in path order, so packing
the whole matrix of a large repository to keep its first few hundred packets is wasted work. This picks
the first units (files or chunks), in the packer's order, whose estimated tokens fill the run's packets with
a margin; the rest stays pending for later runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from audit_mcp.engine.packets import TOKENS_PER_TASK, Queued, queued_tokens
from audit_mcp.store.records import FileRow

MARGIN = 1.5  # packets rarely fill their budget exactly, and neighbours travel together
Q = TypeVar("Q", bound=Queued)


def head_of_queue(units: Iterable[Q], files: Mapping[str, FileRow], *, packets: int, room: int) -> list[Q]:
    """The units of the queue the next run can hold (all of them when they fit anyway).

    ``units`` come in path order (``Tx.queue_units``); reading stops once the run is full, and counts each
    unit's pending cells without building them.
    """
    capacity = packets * room * MARGIN
    chosen: list[Q] = []
    used = 0.0
    for count, unit in enumerate(units):
        # A unit larger than the room still makes a packet of its own: count units as well as tokens.
        if used >= capacity and count >= packets * MARGIN:
            break
        used += queued_tokens(unit, files) + TOKENS_PER_TASK * unit.count
        chosen.append(unit)
    return chosen
