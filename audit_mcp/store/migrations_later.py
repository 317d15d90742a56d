"""The later named schema migrations (from 0016 on), in order; ``migrations`` applies them after the earlier ones.

The same rules hold: portable SQL, one script per migration, never edited once released.
"""

from __future__ import annotations

LATER: tuple[tuple[str, str], ...] = (
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
        # What a ledger entry says in fields as well as in words (store.ledger): a worker's packet, start, end
        # and exit status, a merge's usage, the forecast made before an audit's first dispatch; JSON, or NULL.
        "0021_ledger_data",
        """
        ALTER TABLE ledger ADD COLUMN data TEXT
        """,
    ),
    (
        # The code map (engine.codemap): each edge's weight and the links it carries (what the source names in
        # the target, and where), the lines a chunked file's chunks may start at, and the entry points (route
        # handlers, main functions) the map found. Edges stored before read as import edges of weight 1.
        "0022_code_map",
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
    (
        # The code map's facts cache (store.code_facts): each file's extracted facts by its content hash and
        # grammar, so a new audit parses only the files that changed. Not per audit; kept to what the latest
        # audits' manifests use. Every row is of the one extraction version ``code_facts_version`` names (a
        # digest of the extractor's version, the installed tree-sitter and language pack, and the code that
        # reads the trees), with the compression dictionary the rows are packed with.
        "0023_code_facts",
        """
        CREATE TABLE code_facts (
            sha256 TEXT NOT NULL,
            grammar TEXT NOT NULL,
            facts BLOB NOT NULL,
            PRIMARY KEY (sha256, grammar)
        ) WITHOUT ROWID;
        CREATE TABLE code_facts_version (
            id INTEGER PRIMARY KEY,
            version TEXT NOT NULL,
            label TEXT NOT NULL,
            zdict BLOB NOT NULL
        )
        """,
    ),
)
