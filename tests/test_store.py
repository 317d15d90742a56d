"""Migrations are cut into statements by SQLite's own tokenizer, so a ';' inside a literal is data."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from audit_mcp.store.migrations import MIGRATIONS, split_sql
from audit_mcp.store.sqlite import Store

SCRIPT = """
CREATE TABLE note (id INTEGER PRIMARY KEY, body TEXT);
CREATE TABLE log (msg TEXT);
CREATE TRIGGER noted AFTER INSERT ON note BEGIN
  INSERT INTO log VALUES ('inserted; ' || new.body);
END;
INSERT INTO note (body) VALUES ('a;b'), ('it''s; fine');
-- a comment; with a semicolon
/* block; comment */ INSERT INTO "note" (body) VALUES ('x;y')
"""


def test_a_semicolon_inside_a_literal_a_comment_or_a_trigger_body_does_not_end_a_statement() -> None:
    statements = split_sql(SCRIPT)
    assert len(statements) == 5  # a comment belongs to the statement after it
    assert statements[2].startswith("CREATE TRIGGER noted") and statements[2].endswith("END;")
    assert statements[3] == "INSERT INTO note (body) VALUES ('a;b'), ('it''s; fine');"
    assert statements[4].endswith("""INSERT INTO "note" (body) VALUES ('x;y')""")  # the last needs no ';'


@pytest.mark.parametrize(
    "script",
    ["SELECT 'unterminated; literal", "CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1;", "/* open; comment"],
    ids=["literal", "trigger-without-end", "comment"],
)
def test_an_unterminated_statement_is_an_error_not_a_guess(script: str) -> None:
    with pytest.raises(ValueError, match="unterminated SQL statement"):
        split_sql(script)


def test_a_migration_with_literals_and_a_trigger_applies_through_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path, migrations=(*MIGRATIONS, ("9999_notes", SCRIPT)))
    assert "9999_notes" in store.applied_migrations()
    conn = sqlite3.connect(tmp_path / "audit.sqlite3")
    try:
        assert [r[0] for r in conn.execute("SELECT body FROM note ORDER BY id")] == ["a;b", "it's; fine", "x;y"]
        assert [r[0] for r in conn.execute("SELECT msg FROM log")] == [
            "inserted; a;b",
            "inserted; it's; fine",
            "inserted; x;y",
        ]
    finally:
        conn.close()
    Store(tmp_path, migrations=(*MIGRATIONS, ("9999_notes", SCRIPT)))  # applied once: a second open changes nothing


def test_the_shipped_migrations_split_into_complete_statements() -> None:
    for name, sql in MIGRATIONS:
        statements = split_sql(sql)
        assert statements, name
        assert all(sqlite3.complete_statement(s if s.endswith(";") else s + ";") for s in statements), name


def test_files_in_order_pages_forward_and_looks_up_behind_and_edges_between_keep_both_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from audit_mcp.store.audits import FileWindow
    from audit_mcp.store.records import FileRow

    monkeypatch.setattr(FileWindow, "PAGE", 3)
    store = Store(tmp_path)
    paths = [f"d/f{n:02d}.py" for n in range(10)]
    with store.write() as tx:
        audit = tx.create_audit(
            now="2026-01-01T00:00:00Z", root="/r", git_head=None, git_dirty=False, digest="x", lenses=[]
        )
        tx.insert_files(audit, [FileRow(p, "python", 10, 1, "s", "review", None) for p in paths])
        tx.insert_edges(audit, [(paths[1], paths[2]), (paths[2], paths[8]), (paths[0], "lib/x.py")])
    with store.read() as tx:
        window = tx.files_in_order(audit)
        assert window[paths[4]].path == paths[4] and len(window) == 3  # one page, from the path asked for
        assert window[paths[9]].path == paths[9]  # past the page: the next page
        assert window[paths[0]].path == paths[0]  # behind it: one lookup
        with pytest.raises(KeyError):
            window["d/missing.py"]
        assert tx.edges_between(audit, {paths[1], paths[2], paths[3]}) == [(paths[1], paths[2])]
        assert tx.edges_between(audit, set()) == []
        assert tx.edges_touching(audit, {paths[2]}) == [(paths[1], paths[2]), (paths[2], paths[8])]
        assert tx.edges_touching(audit, {paths[0]}) == [(paths[0], "lib/x.py")]


def test_import_edges_stored_before_the_table_was_keyed_survive_the_upgrade(tmp_path: Path) -> None:
    # A database migrated up to the migration before edges were stored by their key alone.
    before = tuple(m for m in MIGRATIONS if m[0] < "0015_edges_by_key")
    store = Store(tmp_path, migrations=before)
    with store.write() as tx:
        audit = tx.create_audit(
            now="2026-01-01T00:00:00Z", root="/r", git_head=None, git_dirty=False, digest="x", lenses=[]
        )
        tx.insert_edges(audit, [("b.py", "a.py"), ("a.py", "c.py"), ("a.py", "b.py")])
    store.close()
    upgraded = Store(tmp_path)
    assert "0015_edges_by_key" in upgraded.applied_migrations()
    with upgraded.read() as tx:
        assert tx.edges(audit) == [("a.py", "b.py"), ("a.py", "c.py"), ("b.py", "a.py")]
    upgraded.close()
    conn = sqlite3.connect(tmp_path / "audit.sqlite3")
    try:
        (ddl,) = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'edges'").fetchone()
        assert "WITHOUT ROWID" in ddl.upper()
    finally:
        conn.close()


def test_import_edges_stored_before_the_code_map_read_as_imports_after_the_upgrade(tmp_path: Path) -> None:
    from audit_mcp.engine.codemap.graph import CodeGraph  # the engine's reading of the stored edges

    before = tuple(m for m in MIGRATIONS if m[0] < "0022_code_map")
    store = Store(tmp_path, migrations=before)
    with store.write() as tx:
        audit = tx.create_audit(
            now="2026-01-01T00:00:00Z", root="/r", git_head=None, git_dirty=False, digest="x", lenses=[]
        )
        tx.insert_edges(audit, [("a.py", "b.py")])
    store.close()
    upgraded = Store(tmp_path)
    assert "0022_code_map" in upgraded.applied_migrations()
    with upgraded.read() as tx:
        assert tx.weights_between(audit, {"a.py", "b.py"}) == [("a.py", "b.py", 1)]
        graph = CodeGraph(tx.map_edges_touching(audit, {"b.py"}))
        assert [(e.src, e.dst, e.links) for e in graph.incoming("b.py")] == [
            ("a.py", "b.py", (("import", "", 0, 0, 0, 1),))
        ]
        assert tx.entry_points(audit) == []
    upgraded.close()


def test_a_store_from_before_the_facts_cache_gets_an_empty_one_that_holds_bytes(tmp_path: Path) -> None:
    before = tuple(m for m in MIGRATIONS if m[0] < "0023_code_facts")
    Store(tmp_path, migrations=before).close()
    upgraded = Store(tmp_path)
    assert upgraded.applied_migrations()[-1] == "0023_code_facts"
    with upgraded.write() as tx:
        assert tx.code_facts("v") == (b"", [])
        assert tx.record_code_facts("v", "a version", b"\x00dictionary", [("h", "python", b"\x00\xff\x00")])
    with upgraded.read() as tx:
        assert tx.code_facts("v") == (b"\x00dictionary", [("h", "python", b"\x00\xff\x00")])
    upgraded.close()


def test_run_plans_stored_in_the_run_row_before_survive_the_upgrade(tmp_path: Path) -> None:
    # A database migrated up to the migration before plans had a table of their own, with a run in it.
    before = tuple(m for m in MIGRATIONS if m[0] < "0017_run_plans")
    store = Store(tmp_path, migrations=before)
    plan = {"run_id": "A1-R1", "waves": [["A1-R1-P01"]], "packets": [{"packet_id": "A1-R1-P01"}]}
    with store.write() as tx:
        audit = tx.create_audit(
            now="2026-01-01T00:00:00Z", root="/r", git_head=None, git_dirty=False, digest="x", lenses=[]
        )
        tx.conn.execute(
            "INSERT INTO runs (run_id, audit_id, seq, kind, state, created_at, merged_at, wave_size, plan)"
            " VALUES ('A1-R1', ?, 1, 'dispatch', 'open', '2026-01-01T00:00:00Z', NULL, 4, ?)",
            (audit, json.dumps(plan)),
        )
    store.close()
    upgraded = Store(tmp_path)
    with upgraded.write() as tx:
        run = tx.run("A1-R1")
        assert run is not None and run.plan == plan and run.state == "open" and run.wave_size == 4
        assert tx.run_waves(audit) == {"A1-R1": [["A1-R1-P01"]]}
        tx.finish_run("A1-R1", "2026-01-01T01:00:00Z")  # the run's state changes; its plan is left as it was
    with upgraded.read() as tx:
        merged = tx.run("A1-R1")
        assert merged is not None and merged.state == "merged" and merged.plan == plan
        assert [r.plan for r in tx.runs(audit)] == [plan] and tx.runs(audit, plan=False)[0].plan == {}
    upgraded.close()
