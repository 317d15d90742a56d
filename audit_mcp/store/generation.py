"""The store's generations: numbers write transactions raise as they commit.

``n`` moves with every write transaction. ``q``, the queue's generation, moves with every write transaction
except one that said it only records a packet's answer (``Tx.records_answer_only``: the submission, the
packet's state, its claim, a failure the host reported for it, the log) or what a host said of itself
(``Tx.records_host_only``: a next_step's capabilities), which change nothing a forecast reads. Whatever is
computed from a read of the queue, the manifest, the import graph, the runs and the cells (a forecast packs
the next run from them) stays true while ``q`` is the one it was read at, in any process or host: every
change commits through a write transaction, and only those that declare they leave all of it alone keep ``q``.
"""

from __future__ import annotations

import uuid
from typing import Any

GENERATION_MIGRATION = "0014_generation"
QUEUE_GENERATION_MIGRATION = "0018_queue_generation"
_BUMP = "UPDATE generation SET n = n + 1, q = q + 1 WHERE id = 1"
_BUMP_ANSWER = "UPDATE generation SET n = n + 1 WHERE id = 1"
# Run after the migrations: the first store to see the table names its origin.
ORIGIN = "UPDATE generation SET origin = ? WHERE id = 1 AND origin = ''"


def new_origin() -> str:
    return uuid.uuid4().hex


class GenerationQueries:
    conn: Any
    answer_only = False

    def generation(self) -> tuple[str, int]:
        """The store's origin and the generation this transaction reads; read it before what it keys, so what
        follows is at least that new."""
        row = self.conn.execute("SELECT origin, n FROM generation WHERE id = 1").fetchone()
        return (str(row[0]), int(row[1])) if row is not None else ("", -1)

    def queue_generation(self) -> tuple[str, int]:
        """The store's origin and the queue's generation this transaction reads (see the module)."""
        row = self.conn.execute("SELECT origin, q FROM generation WHERE id = 1").fetchone()
        return (str(row[0]), int(row[1])) if row is not None else ("", -1)

    def records_answer_only(self) -> None:
        """Say that this write transaction records a packet's answer and nothing else (the submission, the
        packet's state, claims, a failure the host reported for it, the log): it keeps the queue's generation,
        so forecasts are not packed again."""
        self.answer_only = True

    def records_host_only(self) -> None:
        """Say that this write transaction records what a host said of itself and nothing else (its remembered
        capabilities, a cleared blocker, the log): it keeps the queue's generation too. What a forecast takes
        from the host (the budget, the run's size) is part of its key, not of the queue."""
        self.answer_only = True

    def committed_queue_generation(self) -> int:
        """The queue's generation this write transaction leaves as it commits: what it writes is keyed by it.
        (Writers wait for each other, so nothing else commits in between.)"""
        return self.queue_generation()[1] + (0 if self.answer_only else 1)

    def bump(self, *, queue: bool = True) -> str:
        """The statement that raises the generations as this write transaction commits (``queue``: False for
        a store whose migrations stop before the queue's generation, which only tests of upgrades open)."""
        return _BUMP_ANSWER if self.answer_only or not queue else _BUMP
