"""The store's first named migrations (the schema as it was first laid out, and what the first releases
added to it), applied before those in ``migrations``; never edited, only followed."""

from __future__ import annotations

EARLY: tuple[tuple[str, str], ...] = (
    (
        "0001_initial",
        """
        CREATE TABLE audits (
            audit_id INTEGER PRIMARY KEY,
            created_at TEXT NOT NULL,
            root TEXT NOT NULL,
            git_head TEXT,
            git_dirty INTEGER NOT NULL,
            manifest_digest TEXT NOT NULL,
            lenses TEXT NOT NULL,
            host_caps TEXT NOT NULL,
            blocker TEXT,
            synthesized_at TEXT
        );
        CREATE TABLE files (
            audit_id INTEGER NOT NULL,
            path TEXT NOT NULL,
            language TEXT NOT NULL,
            size INTEGER NOT NULL,
            line_count INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            scope TEXT NOT NULL,
            skip_reason TEXT,
            PRIMARY KEY (audit_id, path)
        );
        CREATE TABLE edges (
            audit_id INTEGER NOT NULL,
            src TEXT NOT NULL,
            dst TEXT NOT NULL,
            PRIMARY KEY (audit_id, src, dst)
        );
        CREATE TABLE cells (
            audit_id INTEGER NOT NULL,
            task_id TEXT NOT NULL,
            path TEXT NOT NULL,
            start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL,
            lens TEXT NOT NULL,
            state TEXT NOT NULL,
            attempts INTEGER NOT NULL,
            run_id TEXT,
            packet_id TEXT,
            reason TEXT,
            content_hash TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (audit_id, task_id)
        );
        CREATE INDEX cells_state ON cells (audit_id, state);
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            audit_id INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            state TEXT NOT NULL,
            created_at TEXT NOT NULL,
            merged_at TEXT,
            wave_size INTEGER NOT NULL,
            plan TEXT NOT NULL
        );
        CREATE TABLE packets (
            packet_id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            audit_id INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            state TEXT NOT NULL,
            estimated_tokens INTEGER NOT NULL,
            model_tier TEXT NOT NULL,
            tier_reason TEXT NOT NULL,
            prompt_path TEXT NOT NULL
        );
        CREATE TABLE packet_tasks (
            packet_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            PRIMARY KEY (packet_id, task_id)
        );
        CREATE TABLE submissions (
            packet_id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            digest TEXT NOT NULL,
            payload TEXT NOT NULL,
            accepted_at TEXT NOT NULL
        );
        CREATE TABLE findings (
            finding_id INTEGER PRIMARY KEY,
            audit_id INTEGER NOT NULL,
            run_id TEXT NOT NULL,
            packet_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            lens TEXT NOT NULL,
            payload TEXT NOT NULL
        );
        CREATE TABLE failures (
            failure_id INTEGER PRIMARY KEY,
            audit_id INTEGER NOT NULL,
            run_id TEXT NOT NULL,
            packet_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            detail TEXT NOT NULL,
            at TEXT NOT NULL
        );
        CREATE TABLE ledger (
            entry_id INTEGER PRIMARY KEY,
            at TEXT NOT NULL,
            audit_id INTEGER,
            actor TEXT NOT NULL,
            action TEXT NOT NULL,
            detail TEXT NOT NULL,
            outcome TEXT NOT NULL
        );
        """,
    ),
    (
        "0003_leases",
        """
        ALTER TABLE packets ADD COLUMN lease_expires_at TEXT;
        CREATE INDEX packets_run ON packets (run_id, state)
        """,
    ),
    (
        "0004_findings",
        """
        CREATE TABLE leads (
            audit_id INTEGER NOT NULL,
            lead_id TEXT NOT NULL,
            path TEXT NOT NULL,
            start_line INTEGER NOT NULL,
            payload TEXT NOT NULL,
            PRIMARY KEY (audit_id, lead_id)
        );
        CREATE TABLE packet_leads (
            packet_id TEXT NOT NULL,
            lead_id TEXT NOT NULL,
            PRIMARY KEY (packet_id, lead_id)
        );
        CREATE TABLE lead_verdicts (
            audit_id INTEGER NOT NULL,
            lead_id TEXT NOT NULL,
            packet_id TEXT NOT NULL,
            task_id TEXT NOT NULL,
            verdict TEXT NOT NULL,
            reason TEXT NOT NULL,
            PRIMARY KEY (audit_id, lead_id, packet_id, task_id)
        );
        """,
    ),
    (
        "0005_queue_index",
        """
        DROP INDEX cells_state;
        CREATE INDEX cells_queue ON cells (audit_id, state, path, start_line, end_line, lens)
        """,
    ),
    (
        "0006_submission_origin",
        """
        ALTER TABLE submissions ADD COLUMN origin TEXT
        """,
    ),
    (
        "0007_file_kinds",
        """
        ALTER TABLE files ADD COLUMN kind TEXT NOT NULL DEFAULT 'source'
        """,
    ),
    (
        "0008_requeues_and_abandon",
        """
        CREATE TABLE requeues (
            request_id INTEGER PRIMARY KEY,
            audit_id INTEGER NOT NULL,
            task_id TEXT NOT NULL,
            reason TEXT NOT NULL,
            requested_at TEXT NOT NULL,
            actor TEXT NOT NULL,
            served_run_id TEXT
        );
        CREATE INDEX requeues_task ON requeues (audit_id, task_id);
        ALTER TABLE audits ADD COLUMN abandoned_at TEXT;
        ALTER TABLE audits ADD COLUMN abandon_reason TEXT
        """,
    ),
    (
        "0009_cell_kinds",
        """
        ALTER TABLE cells ADD COLUMN kind TEXT NOT NULL DEFAULT 'review';
        ALTER TABLE cells ADD COLUMN subject TEXT;
        ALTER TABLE packets ADD COLUMN kind TEXT NOT NULL DEFAULT 'review';
        CREATE INDEX cells_kind ON cells (audit_id, kind, state);
        CREATE TABLE threat_models (
            audit_id INTEGER PRIMARY KEY,
            task_id TEXT NOT NULL,
            packet_id TEXT,
            origin TEXT NOT NULL,
            payload TEXT NOT NULL,
            recorded_at TEXT NOT NULL
        );
        CREATE TABLE finding_verdicts (
            audit_id INTEGER NOT NULL,
            task_id TEXT NOT NULL,
            subject TEXT NOT NULL,
            packet_id TEXT NOT NULL,
            payload TEXT NOT NULL,
            PRIMARY KEY (audit_id, task_id)
        );
        CREATE TABLE runtime_evidence (
            evidence_id INTEGER PRIMARY KEY,
            audit_id INTEGER NOT NULL,
            fingerprint TEXT NOT NULL,
            verdict TEXT NOT NULL,
            payload TEXT NOT NULL,
            added_at TEXT NOT NULL
        );
        CREATE INDEX runtime_evidence_audit ON runtime_evidence (audit_id, fingerprint)
        """,
    ),
    (
        "0010_runs_in_flight",
        """
        CREATE TABLE run_contexts (
            run_id TEXT PRIMARY KEY,
            context TEXT NOT NULL
        );
        CREATE TABLE reported_failures (
            packet_id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            detail TEXT NOT NULL,
            at TEXT NOT NULL
        );
        CREATE INDEX reported_failures_run ON reported_failures (run_id)
        """,
    ),
    (
        "0011_packet_claims",
        """
        ALTER TABLE packets ADD COLUMN holder TEXT;
        ALTER TABLE packets ADD COLUMN claimed_at TEXT;
        ALTER TABLE packets ADD COLUMN claim_attempt INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE packets ADD COLUMN reported_error TEXT
        """,
    ),
)
