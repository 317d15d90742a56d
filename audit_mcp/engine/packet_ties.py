"""How a packet grows: the ties between files (the code map's weighted edges, and a feature's folder) and the
packet being filled, which takes the files most tied to what it holds while they fit.

A tie is an edge's weight (both ways) over the geometric mean of the two files' total weights, so that a file
everything uses (a hub) does not pull unrelated files together; sharing a folder of a feature's size adds
``FOLDER_TIE``.
"""

from __future__ import annotations

import heapq
import math
import posixpath
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol

MAX_FILES_PER_PACKET = 24
MAX_TASKS_PER_PACKET = 120
# A tie at least this strong (``Builder.affinity``) is followed before the seed's folder is filled.
STRONG_TIE = 0.2
# What sharing a folder adds to two files' tie: a feature's parts (a Django app's views, forms and checks; a Go
# package) follow a file of theirs into its packet, ahead of weak ties elsewhere. A folder of more files than
# this is a collection more than a feature: its files are tied by the code map alone.
FOLDER_TIE = 0.25
FEATURE_FILES = 32
# An edge: (from, to) (weight 1) or (from, to, weight).
WeightedEdge = tuple[str, str] | tuple[str, str, int]


class Slot(Protocol):
    """What a packet knows of a unit it may take: its file, its tokens, and how many tasks it brings."""

    @property
    def path(self) -> str: ...
    @property
    def tokens(self) -> int: ...
    @property
    def count(self) -> int: ...


def ties(edges: Iterable[WeightedEdge]) -> dict[str, dict[str, float]]:
    """Each file's neighbours, with how strongly they are tied: the weight of the edges between the two (both
    ways) over the geometric mean of each file's total weight."""
    weights: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for edge in edges:
        src, dst = edge[0], edge[1]
        if src == dst:
            continue
        w = edge[2] if len(edge) > 2 else 1
        weights[src][dst] += w
        weights[dst][src] += w
    totals = {path: sum(found.values()) for path, found in weights.items()}
    return {
        path: {other: w / math.sqrt(totals[path] * totals[other]) for other, w in found.items()}
        for path, found in weights.items()
    }


class Builder:
    """One packet being filled."""

    def __init__(
        self,
        units: Sequence[Slot],
        assigned: list[bool],
        ties: Mapping[str, Mapping[str, float]],
        room: int,
        siblings: Mapping[str, list[str]],
    ) -> None:
        self.units, self.assigned, self.ties, self.room, self.siblings = units, assigned, ties, room, siblings
        self.chosen: list[int] = []
        self.used = 0
        self.tasks = 0
        self.paths: set[str] = set()
        # How strongly each file outside the packet is tied to the files in it.
        self.affinity: dict[str, float] = defaultdict(float)

    def fits(self, i: int) -> bool:
        unit = self.units[i]
        new_file = unit.path not in self.paths
        return (
            self.used + unit.tokens <= self.room
            and self.tasks + unit.count <= MAX_TASKS_PER_PACKET
            and (not new_file or len(self.paths) < MAX_FILES_PER_PACKET)
        )

    def offer(self, i: int) -> bool:
        if self.assigned[i] or not self.fits(i):
            return False
        self.take(i)
        return True

    def take(self, i: int) -> None:
        unit = self.units[i]
        self.assigned[i] = True
        self.chosen.append(i)
        self.used += unit.tokens
        self.tasks += unit.count
        if unit.path not in self.paths:
            self.paths.add(unit.path)
            self.affinity.pop(unit.path, None)
            for other, tie in self._ties_of(unit.path):
                if other not in self.paths:
                    self.affinity[other] += tie

    def _ties_of(self, path: str) -> Iterator[tuple[str, float]]:
        """The files tied to ``path``: by the code map, and by sharing its folder."""
        yield from self.ties.get(path, {}).items()
        siblings = self.siblings.get(posixpath.dirname(path), ())
        if len(siblings) <= FEATURE_FILES:
            for other in siblings:
                if other != path:
                    yield other, FOLDER_TIE

    def follow(self, by_path: Mapping[str, list[int]], floor: float, top: str | None = None) -> None:
        """Take the files most tied to the packet, strongest first (ties of equal strength in path order),
        while ties stronger than ``floor`` fit; with ``top``, only files of that top-level folder (a weak tie
        to another app would take part of it, splitting what belongs together there)."""
        heap = [(-tie, path) for path, tie in self.affinity.items() if tie > floor and _within(path, top)]
        heapq.heapify(heap)
        while heap and len(self.paths) < MAX_FILES_PER_PACKET and self.used < self.room:
            negative, path = heapq.heappop(heap)
            if path in self.paths or self.affinity.get(path) != -negative:
                continue  # taken, or its tie grew since (the stronger entry is in the heap too)
            before = len(self.paths)
            for i in by_path.get(path, ()):
                self.offer(i)
            if len(self.paths) > before:
                for other, _ in self._ties_of(path):
                    now = self.affinity.get(other, 0.0)
                    if other not in self.paths and now > floor and _within(other, top):
                        heapq.heappush(heap, (-now, other))


def _within(path: str, top: str | None) -> bool:
    """Whether ``path`` is in top-level folder ``top`` (``""`` for the root's files; ``None``: anywhere)."""
    if top is None:
        return True
    cut = path.find("/")
    return (path[:cut] if cut != -1 else "") == top
