"""The base of every aggregate's queries: the connection of one open transaction."""

from __future__ import annotations

import sqlite3


class Queries:
    """Queries that run inside the caller's transaction (see ``Store.read`` and ``Store.write``)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
