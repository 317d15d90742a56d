"""Connection handling for a shared PostgreSQL database: the one place its connections are opened.

One database holds the audits of many repositories, each in its own schema (``repo_<digest>``, named by
the repository's identity, so every checkout of it finds the same audit) beside the shared ``audit_mcp``
schema, which lists the repositories and can hold the learned rate-limit state. The queries are the
SQLite backend's, translated by ``dialect``; write transactions take the repository's advisory lock
first, so writers of one audit wait for each other as SQLite's ``BEGIN IMMEDIATE`` makes them, and
readers see one snapshot. Connections come from a small pool: a server answers many tool calls at once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql as pgsql
from psycopg.rows import RowMaker
from psycopg_pool import ConnectionPool, PoolTimeout

from audit_mcp.core.errors import StateError
from audit_mcp.store.dialect import TEXT_ORDER, to_postgres
from audit_mcp.store.generation import GENERATION_MIGRATION, ORIGIN, QUEUE_GENERATION_MIGRATION, new_origin
from audit_mcp.store.identity import RepoIdentity, redact
from audit_mcp.store.migrations import MIGRATIONS, split_sql
from audit_mcp.store.queries import Cursor
from audit_mcp.store.tx import Tx

SHARED_SCHEMA = "audit_mcp"
LOCK_TIMEOUT_MS = 300_000  # writers of one audit wait for each other this long (a dispatch can take a while)
CONNECT_TIMEOUT_SECONDS = 10
_GLOBAL_LOCK = 0x6175_6469  # serialises creating schemas and applying migrations


class Row(tuple[Any, ...]):
    """A row readable by position and by column name, as ``sqlite3.Row`` is (the queries use both)."""

    _index: dict[str, int] = {}  # noqa: RUF012 - set per result by ``_rows``

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


def _rows(cursor: Any) -> RowMaker[Row]:
    names = [column.name for column in cursor.description or ()]
    kind = type("Row", (Row,), {"_index": {name: i for i, name in enumerate(names)}})

    def make(values: Sequence[Any]) -> Row:
        row: Row = kind(values)
        return row

    return make


class PgConnection:
    """A psycopg connection that takes the project's SQL (``?`` placeholders) and returns ``Row``s."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.raw = conn

    def execute(self, sql: str, parameters: Any = None, /) -> Cursor:
        cursor = self.raw.cursor(row_factory=_rows)
        cursor.execute(to_postgres(sql, parameters=parameters is not None), parameters)
        return cursor

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Cursor:
        cursor = self.raw.cursor(row_factory=_rows)
        rows = list(parameters)
        if not rows:
            return cursor
        if len(rows) >= COPY_MIN_ROWS and (copy := _copy_of(sql)) is not None:
            with cursor.copy(copy) as stream:
                for row in rows:
                    stream.write_row(row)
            return cursor
        cursor.executemany(to_postgres(sql, parameters=True), rows)
        return cursor


# An INSERT of named columns whose values are all placeholders: its rows go in one COPY stream, not a statement
# each (a new audit's manifest, import edges and matrix are tens of thousands of rows).
_PLAIN_INSERT = re.compile(r"\s*INSERT INTO (\w+) \(([\w\s,]+)\) VALUES \((\?(?:\s*,\s*\?)*)\)\s*", re.ASCII)
COPY_MIN_ROWS = 32  # below it the statements' pipeline costs about as little


def _copy_of(sql: str) -> pgsql.Composed | None:
    """``COPY table (columns) FROM STDIN`` for a plain INSERT (``_PLAIN_INSERT``), else ``None``."""
    match = _PLAIN_INSERT.fullmatch(sql)
    if match is None:
        return None
    columns = [c.strip() for c in match[2].split(",")]
    if len(columns) != match[3].count("?"):
        return None
    return pgsql.SQL("COPY {} ({}) FROM STDIN").format(
        pgsql.Identifier(match[1]), pgsql.SQL(", ").join(pgsql.Identifier(c) for c in columns)
    )


def schema_for(identity: RepoIdentity) -> str:
    return "repo_" + hashlib.sha256(identity.key.encode("utf-8")).hexdigest()[:20]


def _lock_key(schema: str) -> int:
    return int.from_bytes(hashlib.sha256(schema.encode("utf-8")).digest()[:8], "big", signed=True)


class PostgresStore:
    """Opens pooled connections to one repository's schema and applies migrations once."""

    dialect = "postgresql"

    def __init__(
        self,
        url: str,
        identity: RepoIdentity,
        migrations: tuple[tuple[str, str], ...] = MIGRATIONS,
        *,
        migrate: bool = True,
    ) -> None:
        self.url = url
        self.identity = identity
        self.schema = schema_for(identity)
        self.location = f"{redact(url)} (schema {self.schema}, {identity.label})"
        self._lock = _lock_key(self.schema)
        self._queue = any(name == QUEUE_GENERATION_MIGRATION for name, _ in migrations)
        self.pool = ConnectionPool(
            url,
            min_size=0,
            max_size=32,  # a host runs many reviewers at once, and a write may read on a second connection
            max_idle=60,
            timeout=LOCK_TIMEOUT_MS / 1000,
            kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_SECONDS},
            configure=self._configure,
            open=True,
            name=self.schema,
        )
        try:
            if migrate:  # (``False``: only to look, as ``audit-mcp store status`` does)
                self._migrate(migrations)
        except BaseException:
            self.pool.close()
            raise

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(f"SET lock_timeout = {LOCK_TIMEOUT_MS}")
        conn.execute(f'SET search_path TO "{self.schema}", {SHARED_SCHEMA}')

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (autocommit; open a transaction on it), for this package's other modules."""
        with self._connection() as conn:
            yield conn

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self.pool.connection() as conn:
                yield conn
        except (PoolTimeout, psycopg.OperationalError) as exc:
            raise StateError(
                f"the PostgreSQL store {redact(self.url)} failed: {exc}. Check that the server runs and accepts "
                "this user (see docs/shared-store.md), then try again; nothing was changed."
            ) from exc

    def _migrate(self, migrations: tuple[tuple[str, str], ...]) -> None:
        now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_GLOBAL_LOCK,))
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SHARED_SCHEMA}")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {SHARED_SCHEMA}.repositories (schema_name TEXT PRIMARY KEY,"
                " identity TEXT NOT NULL, label TEXT NOT NULL, created_at TEXT NOT NULL, last_seen_at TEXT NOT NULL)"
            )
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            conn.execute(
                f"INSERT INTO {SHARED_SCHEMA}.repositories (schema_name, identity, label, created_at, last_seen_at)"
                " VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT (schema_name) DO UPDATE SET last_seen_at = EXCLUDED.last_seen_at",
                (self.schema, self.identity.key, self.identity.label, now, now),
            )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations"
                f" (name TEXT COLLATE {TEXT_ORDER} PRIMARY KEY, applied_at TEXT COLLATE {TEXT_ORDER} NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT name FROM migrations")}
            pg = PgConnection(conn)
            for name, sql in migrations:
                if name in done:
                    continue
                for statement in split_sql(sql):
                    pg.execute(statement)
                pg.execute("INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (name, now))
            if any(name == GENERATION_MIGRATION for name, _ in migrations):
                pg.execute(ORIGIN, (new_origin(),))
            self._order_text_as_sqlite(conn)

    def _order_text_as_sqlite(self, conn: psycopg.Connection[Any]) -> None:
        """Give every text column of this repository's schema the ``"C"`` collation (``dialect``): the
        columns of a store made before the dialect said so, in a database whose default collation is
        linguistic, order paths otherwise than SQLite and Python do. Once per column; a no-op after."""
        linguistic = conn.execute(
            "SELECT c.relname, a.attname FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped"
            " AND a.atttypid = 'text'::regtype AND a.attcollation <> (SELECT oid FROM pg_collation"
            " WHERE collname = 'C' AND collnamespace = 'pg_catalog'::regnamespace)"
            " ORDER BY c.relname, a.attnum",
            (self.schema,),
        ).fetchall()
        for table, column in linguistic:
            conn.execute(
                pgsql.SQL("ALTER TABLE {}.{} ALTER COLUMN {} TYPE TEXT COLLATE {}").format(
                    pgsql.Identifier(self.schema),
                    pgsql.Identifier(table),
                    pgsql.Identifier(column),
                    pgsql.SQL(TEXT_ORDER),
                )
            )

    def applied_migrations(self) -> list[str]:
        with self.read() as tx:
            if tx.conn.execute("SELECT to_regclass(?)", (f'"{self.schema}".migrations',)).fetchone()[0] is None:
                return []
            return [row[0] for row in tx.conn.execute("SELECT name FROM migrations ORDER BY name")]

    @contextmanager
    def write(self) -> Iterator[Tx]:
        """One write transaction, after every other writer of this repository's audit: committed on
        success, rolled back on any error."""
        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock,))
            tx = Tx(PgConnection(conn), "postgresql")
            yield tx
            # After every other writer of the repository, so the row is never contended.
            conn.execute(tx.bump(queue=self._queue))

    def aside(self, record: Callable[[Tx], None]) -> bool:
        """Run ``record`` in a write transaction of derived data (a recorded forecast): it raises no generation,
        since what it writes follows from state the generation already keys, and waits for no writer. False,
        with nothing written, when another writer holds the repository's lock."""
        with self._connection() as conn, conn.transaction():
            if not conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (self._lock,)).fetchone()[0]:  # type: ignore[index]
                return False
            record(Tx(PgConnection(conn), "postgresql"))
        return True

    @contextmanager
    def claim(self) -> Iterator[Tx]:
        """A write transaction that does not wait for the repository's other writers: for statements that
        lock only the rows they change (``FOR UPDATE SKIP LOCKED``)."""
        with self._connection() as conn, conn.transaction():
            yield Tx(PgConnection(conn), "postgresql")

    @contextmanager
    def read(self) -> Iterator[Tx]:
        """A consistent read snapshot."""
        with self._connection() as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            try:
                yield Tx(PgConnection(conn), "postgresql")
            finally:
                conn.execute("ROLLBACK")

    def repositories(self) -> list[dict[str, str]]:
        """Every repository with audits in this database: its schema, identity, label and when last seen."""
        with self.read() as tx:
            if tx.conn.execute("SELECT to_regclass(?)", (f"{SHARED_SCHEMA}.repositories",)).fetchone()[0] is None:
                return []
            rows = tx.conn.execute(
                f"SELECT schema_name, identity, label, created_at, last_seen_at FROM {SHARED_SCHEMA}.repositories"
                " ORDER BY schema_name"
            ).fetchall()
        return [dict(r) for r in rows]

    def close(self) -> None:
        self.pool.close()
