"""Queries on an audit's code map: its weighted edges with the links they carry, and its entry points.

The edges live in the ``edges`` table beside the plain import edges of audits started before the map
(which read as weight 1, no links); ``engine.codemap.model`` encodes and decodes the links.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from audit_mcp.store.queries import Queries
from audit_mcp.store.records import EntryPoint, MapEdge


class CodeMapQueries(Queries):
    """The code map of an audit."""

    def insert_map(self, audit_id: int, edges: Iterable[MapEdge], entries: Iterable[EntryPoint]) -> None:
        self.conn.executemany(
            "INSERT INTO edges (audit_id, src, dst, weight, links) VALUES (?, ?, ?, ?, ?)",
            [(audit_id, e.src, e.dst, e.weight, e.links) for e in edges],
        )
        self.conn.executemany(
            "INSERT INTO entry_points (audit_id, path, line, symbol, how) VALUES (?, ?, ?, ?, ?)",
            [(audit_id, e.path, e.line, e.symbol, e.how) for e in dict.fromkeys(entries)],
        )

    def weights_between(self, audit_id: int, paths: Collection[str]) -> list[tuple[str, str, int]]:
        """``(from, to, weight)`` of the edges whose two ends are both among ``paths``."""
        if not paths:
            return []
        low, high = min(paths), max(paths)
        rows = self.conn.execute(
            "SELECT src, dst, weight FROM edges WHERE audit_id = ? AND src >= ? AND src <= ? AND dst >= ?"
            " AND dst <= ? ORDER BY src, dst",
            (audit_id, low, high, low, high),
        )
        return [(r[0], r[1], int(r[2])) for r in rows if r[0] in paths and r[1] in paths]

    def map_edges_touching(self, audit_id: int, paths: Collection[str]) -> list[MapEdge]:
        """The edges with at least one end among ``paths``, with their links, in path order."""
        if not paths:
            return []
        out: list[MapEdge] = []
        wanted = sorted(set(paths))
        for i in range(0, len(wanted), 500):
            batch = wanted[i : i + 500]
            marks = ",".join("?" for _ in batch)
            rows = self.conn.execute(
                f"SELECT src, dst, weight, links FROM edges WHERE audit_id = ? AND (src IN ({marks})"
                f" OR dst IN ({marks}))",
                (audit_id, *batch, *batch),
            )
            out += [MapEdge(r[0], r[1], int(r[2]), r[3]) for r in rows]
        return sorted(set(out))

    def weighted_edges(self, audit_id: int) -> list[tuple[str, str, int]]:
        """Every edge of the audit as ``(from, to, weight)``, in path order."""
        rows = self.conn.execute("SELECT src, dst, weight FROM edges WHERE audit_id = ? ORDER BY src, dst", (audit_id,))
        return [(r[0], r[1], int(r[2])) for r in rows]

    def entry_points(self, audit_id: int) -> list[EntryPoint]:
        rows = self.conn.execute(
            "SELECT path, line, symbol, how FROM entry_points WHERE audit_id = ? ORDER BY path, line, symbol, how",
            (audit_id,),
        )
        return [EntryPoint(r[0], int(r[1]), r[2], r[3]) for r in rows]
