"""Connection handling for the embedded SQLite database: the one place connections are opened.

``Store`` applies the named migrations once and runs each transaction on a connection of its own, kept
open between transactions for the next one (opening a connection, and closing the last one, which
checkpoints the write-ahead log, cost more than most transactions). Writers take the lock up front
(``BEGIN IMMEDIATE``) and wait for each other, so many processes can submit at once without losing
anything; a crash leaves the last committed state.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from audit_mcp.store.generation import GENERATION_MIGRATION, ORIGIN, QUEUE_GENERATION_MIGRATION, new_origin
from audit_mcp.store.migrations import MIGRATIONS, split_sql
from audit_mcp.store.tx import Tx

DB_FILENAME = "audit.sqlite3"
BUSY_TIMEOUT_SECONDS = 60.0
WAL_CHECKPOINT_PAGES = 4_000  # about 16 MB of write-ahead log at the default page size
IDLE_CONNECTIONS = 4  # kept open between transactions, for threads that run them side by side


def connect(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), waiting up to a minute for the lock."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
    return conn


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch the database to WAL, once. SQLite answers "database is locked" at once, without waiting, when
    another process holds a lock on a database still in rollback mode (processes opening a new database
    together): wait for it, then find the mode already switched, up to the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    while True:
        try:
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class Store:
    """Opens connections to the database and applies migrations once."""

    dialect = "sqlite"

    def __init__(
        self, artifacts_dir: Path, migrations: tuple[tuple[str, str], ...] = MIGRATIONS, *, migrate: bool = True
    ) -> None:
        self.path = artifacts_dir / DB_FILENAME
        self.location = str(self.path)
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._queue = any(name == QUEUE_GENERATION_MIGRATION for name, _ in migrations)
        if migrate:  # (``False``: only to look, as ``audit-mcp store status`` does)
            artifacts_dir.mkdir(parents=True, exist_ok=True)
            self._migrate(migrations)

    def _connect(self) -> sqlite3.Connection:
        conn = connect(self.path)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        # In write-ahead-log mode a commit is in the log file before COMMIT returns, so it survives the
        # process crashing at any point; the log is synced to disk at checkpoints rather than at every
        # commit, so an OS crash or power loss can roll back the last commits (docs/operations.md, "Durability").
        conn.execute("PRAGMA synchronous = NORMAL")
        # A checkpoint (two syncs and the log's pages copied in) runs in the commit that crosses the limit:
        # one every WAL_CHECKPOINT_PAGES pages, not every 1,000 (SQLite's default), keeps it out of most
        # submissions of a run.
        conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
        return conn

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        """A connection for one transaction: an idle one, or a new one. It goes back to the idle ones when the
        transaction ended cleanly, and is closed when it did not."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
        clean = False
        try:
            yield conn
            clean = not conn.in_transaction
        finally:
            with self._lock:
                keep = clean and len(self._idle) < IDLE_CONNECTIONS
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()

    def _migrate(self, migrations: tuple[tuple[str, str], ...]) -> None:
        conn = self._connect()
        try:
            _use_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
            done = {row[0] for row in conn.execute("SELECT name FROM migrations")}
            for name, sql in migrations:
                if name in done:
                    continue
                for statement in split_sql(sql):
                    conn.execute(statement)
                conn.execute("INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (name, _now()))
            if any(name == GENERATION_MIGRATION for name, _ in migrations):
                conn.execute(ORIGIN, (new_origin(),))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()

    def applied_migrations(self) -> list[str]:
        if not self.path.is_file():
            return []
        with self.read() as tx:
            if tx.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'migrations'").fetchone() is None:
                return []
            return [row[0] for row in tx.conn.execute("SELECT name FROM migrations ORDER BY name")]

    @contextmanager
    def write(self) -> Iterator[Tx]:
        """One write transaction: committed on success, rolled back on any error."""
        with self._connection() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
                tx = Tx(conn)
                yield tx
                conn.execute(tx.bump(queue=self._queue))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    # One writer at a time already: a claim is a write.
    claim = write

    def aside(self, record: Callable[[Tx], None]) -> bool:
        """Run ``record`` in a write transaction of derived data (a recorded forecast): it raises no generation,
        since what it writes follows from state the generation already keys, and waits for no writer. False,
        with nothing written, when another writer holds the lock or the database is read-only."""
        with self._connection() as conn:
            conn.execute("PRAGMA busy_timeout = 0")
            try:
                conn.execute("BEGIN IMMEDIATE")
                record(Tx(conn))
                conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if "locked" in str(exc) or "readonly" in str(exc) or "read-only" in str(exc):
                    return False
                raise
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        return True

    def close(self) -> None:
        """Close the idle connections (a transaction that runs later opens one again)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def repositories(self) -> list[dict[str, str]]:
        """The file holds one repository's audits, the one whose artifacts directory it is in."""
        return []

    @contextmanager
    def read(self) -> Iterator[Tx]:
        """A consistent read snapshot."""
        with self._connection() as conn:
            try:
                conn.execute("BEGIN")
                yield Tx(conn)
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
