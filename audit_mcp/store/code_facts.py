"""The code map's facts cache: each file's extracted facts by its content hash and grammar. Here they are bytes;
``engine.codemap.facts_cache`` packs, checks and unpacks them.

The cache is the store's, not an audit's: the facts of a file's bytes are the same for every audit of the
repository. Every row is of the one extraction version ``code_facts_version`` names: a reader of another
version finds the cache empty, and its first write makes the cache its own (rows of the old version go).
``prune_code_facts`` keeps it to what the latest audits' manifests use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from audit_mcp.store.queries import Queries

_BATCH = 500  # hashes per statement that names them


class CodeFactsQueries(Queries):
    """The facts cache, read whole, written in bulk, pruned after an audit's intake."""

    def code_facts(self, version: str) -> tuple[bytes, list[tuple[str, str, Any]]]:
        """The compression dictionary and every row (``sha256, grammar, facts``) of the cache when it is of
        ``version``; an empty dictionary and no rows when it is of another, or empty."""
        found = self.conn.execute("SELECT version, zdict FROM code_facts_version WHERE id = 1").fetchone()
        if found is None or found[0] != version:
            return b"", []
        rows = self.conn.execute("SELECT sha256, grammar, facts FROM code_facts")
        return bytes(found[1]), [(r[0], r[1], r[2]) for r in rows]

    def record_code_facts(self, version: str, label: str, zdict: bytes, rows: Sequence[tuple[str, str, bytes]]) -> bool:
        """Record ``rows`` (``sha256, grammar, facts``) of ``version``, in place of any rows of the same bytes.
        ``zdict`` is the dictionary they were packed with (empty for none), kept as the cache's when it has
        none yet. False, with nothing recorded, when the cache already has another dictionary."""
        found = self.conn.execute("SELECT version, zdict FROM code_facts_version WHERE id = 1").fetchone()
        if found is None or found[0] != version:
            self._make_own(version, label, zdict)
        elif zdict and not found[1]:
            self.conn.execute("UPDATE code_facts_version SET zdict = ? WHERE id = 1", (zdict,))
        elif zdict and bytes(found[1]) != zdict:
            return False
        hashes = sorted({sha for sha, _, _ in rows})
        for i in range(0, len(hashes), _BATCH):
            batch = hashes[i : i + _BATCH]
            self.conn.execute(f"DELETE FROM code_facts WHERE sha256 IN ({','.join('?' for _ in batch)})", batch)
        self.conn.executemany("INSERT INTO code_facts (sha256, grammar, facts) VALUES (?, ?, ?)", rows)
        return True

    def _make_own(self, version: str, label: str, zdict: bytes) -> None:
        """The cache made ``version``'s, and empty."""
        self.conn.execute("DELETE FROM code_facts_version")
        self.conn.execute(
            "INSERT INTO code_facts_version (id, version, label, zdict) VALUES (1, ?, ?, ?)", (version, label, zdict)
        )
        self.conn.execute("DELETE FROM code_facts")

    def prune_code_facts(self, version: str, keep_audits: int) -> int:
        """Drop every row when the cache is of another version than ``version``, else the rows of bytes that
        no file of the latest ``keep_audits`` audits has (as their manifests say now); the number dropped."""
        found = self.conn.execute("SELECT version FROM code_facts_version WHERE id = 1").fetchone()
        if found is None:
            return 0
        if found[0] != version:
            self.conn.execute("DELETE FROM code_facts_version")
            return int(self.conn.execute("DELETE FROM code_facts").rowcount)
        row = self.conn.execute(
            "SELECT audit_id FROM audits ORDER BY audit_id DESC LIMIT 1 OFFSET ?", (max(0, keep_audits - 1),)
        ).fetchone()
        oldest = 0 if row is None else int(row[0])
        if self.dialect == "postgresql":
            # An anti-join: NOT IN over a subquery larger than the server's work memory is a scan per row.
            sql = (
                "DELETE FROM code_facts WHERE NOT EXISTS (SELECT 1 FROM files WHERE files.sha256 = code_facts.sha256"
                " AND files.audit_id >= ?)"
            )
        else:  # the subquery's hashes are read once, into an index of their own
            sql = "DELETE FROM code_facts WHERE sha256 NOT IN (SELECT sha256 FROM files WHERE audit_id >= ?)"
        return int(self.conn.execute(sql, (oldest,)).rowcount)
