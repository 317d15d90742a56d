"""The head of the review queue: only as many pending cells as one run can hold go to the packer.

A run holds at most ``max_packets_per_run`` packets, and the packer takes files in path order, so packing
the whole matrix of a large repository to keep its first few hundred packets is wasted work. This picks
the cells of the first files, in the packer's order, whose estimated tokens fill the run's packets with a
margin; the rest stays pending for later runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import groupby

from audit_mcp.engine.packets import TOKENS_PER_TASK, unit_tokens
from audit_mcp.store.records import Cell, FileRow

MARGIN = 1.5  # packets rarely fill their budget exactly, and neighbours travel together


def head_of_queue(cells: Iterable[Cell], files: Mapping[str, FileRow], *, packets: int, room: int) -> list[Cell]:
    """The pending cells the next run can hold (all of them when they fit anyway).

    ``cells`` come unit by unit in path order (``Tx.iter_cells``); reading stops once the run is full.
    """
    capacity = packets * room * MARGIN
    chosen: list[Cell] = []
    used = 0.0
    units = groupby(cells, key=lambda c: (c.path, c.start_line, c.end_line))
    for count, ((path, start, end), group) in enumerate(units):
        # A unit larger than the room still makes a packet of its own: count units as well as tokens.
        if used >= capacity and count >= packets * MARGIN:
            break
        members = list(group)
        used += unit_tokens(files[path], start, end) + TOKENS_PER_TASK * len(members)
        chosen.extend(members)
    return chosen
