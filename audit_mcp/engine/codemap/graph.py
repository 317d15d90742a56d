"""The code map of an audit as a graph: its edges in order, indexed by file once for every packet that reads
it (what a file reaches, and what reaches it)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from audit_mcp.engine.codemap.model import Edge
from audit_mcp.store.records import MapEdge


class CodeGraph(Sequence[tuple[str, str]]):
    """Edges between files, in the order given, as ``(from, to)`` pairs, with each file's outgoing and
    incoming edges (in that order) looked up without a scan of every edge."""

    def __init__(self, edges: Iterable[Edge | MapEdge | tuple[str, str]]) -> None:
        self._edges = [_edge(e) for e in edges]
        self._out: dict[str, list[Edge]] | None = None
        self._in: dict[str, list[Edge]] = {}

    def _index(self) -> dict[str, list[Edge]]:
        if self._out is None:
            self._out = {}
            for edge in self._edges:
                self._out.setdefault(edge.src, []).append(edge)
                self._in.setdefault(edge.dst, []).append(edge)
        return self._out

    def outgoing(self, path: str) -> list[Edge]:
        return self._index().get(path, [])

    def incoming(self, path: str) -> list[Edge]:
        self._index()
        return self._in.get(path, [])

    def imports(self, path: str) -> list[str]:
        """The files ``path`` reaches."""
        return [e.dst for e in self.outgoing(path)]

    def imported_by(self, path: str) -> list[str]:
        """The files that reach ``path``."""
        return [e.src for e in self.incoming(path)]

    @overload
    def __getitem__(self, index: int) -> tuple[str, str]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[str, str]]: ...
    def __getitem__(self, index: int | slice) -> tuple[str, str] | Sequence[tuple[str, str]]:
        if isinstance(index, slice):
            return [(e.src, e.dst) for e in self._edges[index]]
        edge = self._edges[index]
        return edge.src, edge.dst

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return ((e.src, e.dst) for e in self._edges)

    def __len__(self) -> int:
        return len(self._edges)


def _edge(found: Edge | MapEdge | tuple[str, str]) -> Edge:
    if isinstance(found, Edge):
        return found
    if isinstance(found, MapEdge):
        return Edge.from_store(found)
    return Edge.of(found[0], found[1], (("import", "", 0, 0, 0, 1),))
