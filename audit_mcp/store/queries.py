"""The base of every aggregate's queries: the connection of one open transaction.

``Connection`` is what the queries need of a connection: ``sqlite3.Connection`` is one as it is, and the
PostgreSQL backend wraps its driver's connection to be one (``?`` placeholders, rows readable by index
and by column name). ``dialect`` names the backend for the few statements that must differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Literal, Protocol

Dialect = Literal["sqlite", "postgresql"]


class Cursor(Protocol):
    """The part of a DB-API cursor the queries use."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def fetchmany(self, size: int = ..., /) -> list[Any]: ...

    def close(self) -> None: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """The part of a DB-API connection the queries use, with ``?`` placeholders."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Cursor: ...


class Queries:
    """Queries that run inside the caller's transaction (see ``Store.read`` and ``Store.write``)."""

    def __init__(self, conn: Connection, dialect: Dialect = "sqlite") -> None:
        self.conn = conn
        self.dialect: Dialect = dialect
