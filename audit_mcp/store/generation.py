"""The store's generation: a number every write transaction raises as it commits.

Whatever is computed from a read of the store alone (a forecast packs the next run from the queue, the
manifest and the import graph) stays true while the generation is the one it was read at, in any process:
every change, whichever host or process makes it, commits through a write transaction.
"""

from __future__ import annotations

import uuid
from typing import Any

GENERATION_MIGRATION = "0014_generation"
BUMP = "UPDATE generation SET n = n + 1 WHERE id = 1"
# Run after the migrations: the first store to see the table names its origin.
ORIGIN = "UPDATE generation SET origin = ? WHERE id = 1 AND origin = ''"


def new_origin() -> str:
    return uuid.uuid4().hex


class GenerationQueries:
    conn: Any

    def generation(self) -> tuple[str, int]:
        """The store's origin and the generation this transaction reads; read it before what it keys, so what
        follows is at least that new."""
        row = self.conn.execute("SELECT origin, n FROM generation WHERE id = 1").fetchone()
        return (str(row[0]), int(row[1])) if row is not None else ("", -1)
