"""The head of the review queue: only as many pending cells as one run can hold go to the packer.

A run holds at most ``max_packets_per_run`` packets, and the packer takes files in path order, so packing
the whole matrix of a large repository to keep its first few hundred packets is wasted work. This picks
the cells of the first files, in the packer's order, whose estimated tokens fill the run's packets with a
margin; the rest stays pending for later runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from audit_mcp.packets import TOKENS_PER_TASK, unit_tokens
from audit_mcp.store import Cell, FileRow

MARGIN = 1.5  # packets rarely fill their budget exactly, and neighbours travel together


def head_of_queue(cells: Sequence[Cell], files: Mapping[str, FileRow], *, packets: int, room: int) -> list[Cell]:
    """The pending cells the next run can hold (all of them when they fit anyway)."""
    capacity = packets * room * MARGIN
    by_unit: dict[tuple[str, int, int], list[Cell]] = defaultdict(list)
    for cell in cells:
        by_unit[(cell.path, cell.start_line, cell.end_line)].append(cell)
    chosen: list[Cell] = []
    used = 0.0
    for units, ((path, start, end), group) in enumerate(sorted(by_unit.items())):
        # A unit larger than the room still makes a packet of its own: count units as well as tokens.
        if used >= capacity and units >= packets * MARGIN:
            break
        used += unit_tokens(files[path], start, end) + TOKENS_PER_TASK * len(group)
        chosen.extend(group)
    return chosen
