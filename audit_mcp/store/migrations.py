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
    (
        # What merging an accepted submission needs (engine.ingest.merge_parts), kept beside its payload when
        # it is accepted: the merge reads task ids and the few results with more to record, not every text.
        # A submission accepted before has none, and the merge reads its payload as before.
        "0016_submission_parts",
        """
        ALTER TABLE submissions ADD COLUMN parts TEXT
        """,
    ),
    (
        # A run's plan (megabytes for a large run) is kept in a table of its own: a run's state changes (a
        # merge) rewrote every byte of it in the same row. Plans carried over as they are.
        "0017_run_plans",
        """
        CREATE TABLE run_plans (
            run_id TEXT PRIMARY KEY,
            plan TEXT NOT NULL
        );
        INSERT INTO run_plans (run_id, plan) SELECT run_id, plan FROM runs;
        CREATE TABLE runs_lean (
            run_id TEXT PRIMARY KEY,
            audit_id INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            state TEXT NOT NULL,
            created_at TEXT NOT NULL,
            merged_at TEXT,
            wave_size INTEGER NOT NULL
        );
        INSERT INTO runs_lean (run_id, audit_id, seq, kind, state, created_at, merged_at, wave_size)
            SELECT run_id, audit_id, seq, kind, state, created_at, merged_at, wave_size FROM runs;
        DROP TABLE runs;
        ALTER TABLE runs_lean RENAME TO runs
        """,
    ),
    (
        # The queue's generation (store.generation): raised by every write transaction but those that only
        # record a packet's answer, so a forecast stays kept while subagents submit.
        "0018_queue_generation",
        """
        ALTER TABLE generation ADD COLUMN q BIGINT NOT NULL DEFAULT 0
        """,
    ),
    (
        # Forecasts recorded under the queue's generation they were packed at (store.forecasts), so any
        # process, the command line's included, reads the next run's packets instead of packing them again.
        "0019_forecasts",
        """
        CREATE TABLE forecasts (
            audit_id INTEGER NOT NULL,
            key TEXT NOT NULL,
            q BIGINT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (audit_id, key)
        )
        """,
    ),
    (
        # The repository's history (store.history): the findings an earlier audit reported in the lines a cell
        # re-reviews (shown to its reviewer, kept open unless answered), and how each earlier finding was
        # resolved (fixed or wrong, with the reviewer's reason and citation, or its lines gone).
        "0020_history",
        """
        CREATE TABLE earlier_findings (
            audit_id INTEGER NOT NULL,
            task_id TEXT NOT NULL,
            ref TEXT NOT NULL,
            from_audit INTEGER NOT NULL,
            fingerprint TEXT NOT NULL,
            payload TEXT NOT NULL,
            PRIMARY KEY (audit_id, task_id, ref)
        );
        CREATE TABLE resolutions (
            audit_id INTEGER NOT NULL,
            fingerprint TEXT NOT NULL,
            how TEXT NOT NULL,
            payload TEXT NOT NULL,
            PRIMARY KEY (audit_id, fingerprint)
        )
        """,
    ),
    (
        # The code map (engine.codemap): each edge's weight and the links it carries (what the source names in
        # the target, and where), the lines a chunked file's chunks may start at, and the entry points (route
        # handlers, main functions) the map found. Edges stored before read as import edges of weight 1.
        "0021_code_map",
        """
        ALTER TABLE edges ADD COLUMN weight INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE edges ADD COLUMN links TEXT;
        ALTER TABLE files ADD COLUMN cuts TEXT;
        CREATE TABLE entry_points (
            audit_id INTEGER NOT NULL,
            path TEXT NOT NULL,
            line INTEGER NOT NULL,
            symbol TEXT NOT NULL,
            how TEXT NOT NULL,
            PRIMARY KEY (audit_id, path, line, symbol, how)
        )
        """,
    ),
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
