"""Named schema migrations, applied in order and recorded in ``migrations``.

SQL here stays portable (no SQLite-only types or functions) so that the same
schema can be created on PostgreSQL; the one SQLite storage clause used,
``WITHOUT ROWID``, is dropped for PostgreSQL (``dialect``), whose tables have no
row id. A migration is a script of several
statements; ``split_sql`` cuts it where SQLite's own tokenizer says a statement
ends, so a ``;`` inside a string literal, a comment or a trigger body is kept.
"""

from __future__ import annotations

import sqlite3

from audit_mcp.store.migrations_early import EARLY
from audit_mcp.store.migrations_later import LATER

MIGRATIONS: tuple[tuple[str, str], ...] = (
    *EARLY,
    (
        # Pending review cells implied by their unit (see store.units): a cell row is written once the cell
        # is assigned or answered. An audit planned before keeps the rows it has, which stay the truth. The
        # queue is read from the units; the few pending rows are found by cells_kind, and every change of
        # a cell's state no longer moves it in a second index.
        "0012_implicit_cells",
        """
        CREATE TABLE units (
            audit_id INTEGER NOT NULL,
            first_task INTEGER NOT NULL,
            path TEXT NOT NULL,
            start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL,
            content_hash TEXT NOT NULL,
            lens_set INTEGER NOT NULL,
            size INTEGER NOT NULL,
            PRIMARY KEY (audit_id, first_task)
        );
        CREATE INDEX units_path ON units (audit_id, path);
        CREATE TABLE lens_sets (
            audit_id INTEGER NOT NULL,
            lens_set INTEGER NOT NULL,
            ord INTEGER NOT NULL,
            lens TEXT NOT NULL,
            PRIMARY KEY (audit_id, lens_set, ord)
        );
        ALTER TABLE cells ADD COLUMN unit INTEGER;
        CREATE INDEX cells_unit ON cells (audit_id, unit);
        DROP INDEX cells_queue
        """,
    ),
    (
        # What a file's status (device, inode, size, modification and change times) said when its bytes were
        # read and hashed: a file whose status still says the same is not read again to know it is unchanged.
        "0013_file_stat",
        """
        ALTER TABLE files ADD COLUMN stat TEXT
        """,
    ),
    (
        # The store's generation (store.generation): raised by every write transaction as it commits, so a
        # result computed from one read of the store is known to hold while the generation is unchanged. Its
        # origin, set once by the store that creates it, tells a database made again apart from the old one.
        "0014_generation",
        """
        CREATE TABLE generation (id INTEGER PRIMARY KEY, n BIGINT NOT NULL, origin TEXT NOT NULL);
        INSERT INTO generation (id, n, origin) VALUES (1, 0, '')
        """,
    ),
    (
        # Import edges are only ever read by their key, so the table is stored as that key alone (a table
        # WITHOUT ROWID on SQLite): one B-tree instead of a table and an index, half the bytes, and less to
        # write at intake. Rewritten from the old table, rows unchanged. (The manifest's rows are larger and
        # read in whole-table scans, which a table without row ids makes slower, so it keeps its row ids.)
        "0015_edges_by_key",
        """
        CREATE TABLE edges_by_key (
            audit_id INTEGER NOT NULL,
            src TEXT NOT NULL,
            dst TEXT NOT NULL,
            PRIMARY KEY (audit_id, src, dst)
        ) WITHOUT ROWID;
        INSERT INTO edges_by_key (audit_id, src, dst) SELECT audit_id, src, dst FROM edges;
        DROP TABLE edges;
        ALTER TABLE edges_by_key RENAME TO edges
        """,
    ),
    *LATER,
)


def split_sql(script: str) -> list[str]:
    """The statements of ``script``, each ending at a ``;`` that SQLite's tokenizer puts outside any string
    literal, quoted name, comment or trigger body. A statement left unterminated is an error."""
    statements: list[str] = []
    pieces = script.split(";")
    buffer = ""
    for piece in pieces[:-1]:
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    tail = (buffer + pieces[-1]).strip()
    # The newline keeps a trailing "--" comment from swallowing the probe's ';'.
    if tail and not sqlite3.complete_statement(tail + "\n;"):
        raise ValueError(f"unterminated SQL statement in a migration: {tail[:80]!r}")
    # A tail of comments only is kept too: executing it is a no-op.
    return [*statements, tail] if tail else statements
