"""The store's queries and transactions behave the same on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit_mcp.core.errors import ConfigError
from audit_mcp.store.backends import Store, open_store
from audit_mcp.store.dialect import to_postgres
from audit_mcp.store.identity import RepoIdentity, redact, store_kind
from audit_mcp.store.records import Cell, CellBatch, CellUpdate, FileRow, Lead, Matrix, PacketRow, RunRow, Verdict
from audit_mcp.usecases.identity import normalize_remote
from audit_mcp.usecases.service import AuditService

NOW = "2026-01-02T03:04:05Z"
IDENTITY = RepoIdentity("name:backend-test", "audit name 'backend-test'")


@pytest.fixture
def store(store_url: str, tmp_path: Path) -> Store:
    opened = open_store(None if store_url == "sqlite" else store_url, tmp_path / "artifacts", lambda: IDENTITY)
    yield opened  # type: ignore[misc]
    opened.close()


def _audit(store: Store) -> int:
    with store.write() as tx:
        audit_id = tx.create_audit(now=NOW, root="/r", git_head="abc", git_dirty=False, digest="d", lenses=["security"])
        tx.insert_files(
            audit_id,
            [
                FileRow("a.py", "python", 10, 3, "h1", "review", None, "source"),
                FileRow("b.py", "python", 20, 6, "h2", "review", None, "source"),
                FileRow("big.bin", "binary", 9_000_000_000, 0, "h3", "skipped", "binary; 100% not text", "data"),
            ],
        )
        tx.insert_edges(audit_id, [("a.py", "b.py")])
    return audit_id


def test_audits_files_and_edges_round_trip(store: Store) -> None:
    first = _audit(store)
    second = _audit(store)
    with store.read() as tx:
        assert tx.audit_ids() == [first, second] and second > first
        current = tx.current_audit()
        assert current is not None and current.audit_id == second and current.lenses == ["security"]
        assert tx.file(first, "big.bin") == FileRow(
            "big.bin", "binary", 9_000_000_000, 0, "h3", "skipped", "binary; 100% not text", "data"
        )  # 64-bit sizes and a literal '%' survive
        assert [f.path for f in tx.files(first)] == ["a.py", "b.py", "big.bin"]
        assert [f.path for f in tx.files(first, scope="skipped")] == ["big.bin"]
        assert tx.file_counts(first) == {"review": 2, "skipped": 1}
        assert tx.edges(first) == [("a.py", "b.py")]
        assert tx.previous_audit_id(second) == first


def test_the_matrix_is_numbered_and_cells_answer_queries_alike(store: Store) -> None:
    audit_id = _audit(store)
    matrix = Matrix(
        units=[("a.py", 1, 3, "h1", 0), ("b.py", 1, 6, "h2", 1)], lens_sets=[["security"], ["security", "correctness"]]
    )
    with store.write() as tx:
        assert tx.insert_matrix(audit_id, matrix, NOW) == 3
    with store.write() as tx:
        cells = tx.cells(audit_id)
        assert [(c.task_id, c.path, c.lens) for c in cells] == [
            ("T00001", "a.py", "security"),
            ("T00003", "b.py", "correctness"),
            ("T00002", "b.py", "security"),
        ]
        assert tx.max_task_number(audit_id) == 3
        assert tx.task_ids_starting(audit_id, "T0000", 2) == ["T00001", "T00002"]
        tx.assign_cells(audit_id, "A1-R1", "A1-R1-P01", [cells[0]], NOW)
        tx.update_cell(audit_id, "T00002", state="reviewed", now=NOW, attempts=1, run_id="A1-R1", packet_id="A1-R1-P01")
    with store.read() as tx:
        assert tx.cell_counts(audit_id) == {"assigned": 1, "pending": 1, "reviewed": 1}
        assert tx.cell_counts_by_lens(audit_id)["security"] == {"assigned": 1, "reviewed": 1}
        assert [c.task_id for c in tx.iter_cells(audit_id, "pending")] == ["T00003"]
        assert tx.cells_by_id(audit_id, ["T00002"])["T00002"].attempts == 1
        assert tx.assigned_packets(audit_id, ["T00001", "T00002"]) == ["A1-R1-P01"]


def test_pending_cells_are_implied_by_their_unit_and_get_a_row_once_changed(store: Store) -> None:
    audit_id = _audit(store)
    matrix = Matrix(
        units=[("a.py", 1, 3, "h1", 0), ("b.py", 1, 3, "h2", 1), ("b.py", 4, 6, "h2", 1)],
        lens_sets=[["security"], ["security", "correctness"]],
    )
    with store.write() as tx:
        assert tx.insert_matrix(audit_id, matrix, NOW) == 5
        assert tx.cell_counts(audit_id) == {"pending": 5}
        tx.insert_cells(
            audit_id, [Cell("C0001", "", 0, 0, "context", "pending", 0, None, None, None, "", "context")], NOW
        )
    with store.read() as tx:
        raw = tx.conn.execute("SELECT COUNT(*) FROM cells WHERE audit_id = ?", (audit_id,)).fetchone()[0]
        assert raw == 1  # only the context cell is a row: the review cells are implied
        queue = [c.task_id for c in tx.iter_cells(audit_id, "pending")]
        assert queue == ["T00001", "T00003", "T00002", "T00005", "T00004"]  # path, line, then lens order
        assert tx.cell_counts_by_kind(audit_id) == {"context": {"pending": 1}, "review": {"pending": 5}}
        assert tx.cell_counts_by_lens(audit_id) == {"security": {"pending": 3}, "correctness": {"pending": 2}}
        assert tx.cells_by_id(audit_id, ["T00004", "T00009", "T4"]) == {
            "T00004": Cell("T00004", "b.py", 4, 6, "security", "pending", 0, None, None, None, "h2")
        }
        assert [c.task_id for c in tx.cells_for_path(audit_id, "b.py")] == ["T00002", "T00003", "T00004", "T00005"]
        assert tx.max_task_number(audit_id) == 5 and tx.task_ids_starting(audit_id, "T0000", 3) == [
            "T00001",
            "T00002",
            "T00003",
        ]
    with store.write() as tx:
        first = tx.cells_by_id(audit_id, ["T00003"])["T00003"]
        tx.assign_cells(audit_id, "A1-R1", "A1-R1-P01", [first], NOW)
        tx.update_cell(audit_id, "T00001", state="failed", now=NOW, attempts=3, reason="gave up")
        tx.carry_cells(audit_id, [("T00005", "reviewed", "A0-R1", "A0-R1-P01", "carried")], NOW)
        tx.delete_cells(audit_id, ["T00002"])  # one cell of a unit: its other cell (T00003) stays
    with store.read() as tx:
        assert tx.cell_counts(audit_id) == {"assigned": 1, "failed": 1, "pending": 2, "reviewed": 1}
        assert tx.cell_counts_by_lens(audit_id) == {
            "security": {"failed": 1, "pending": 1},
            "correctness": {"assigned": 1, "reviewed": 1},
        }
        assert [c.task_id for c in tx.iter_cells(audit_id, "pending")] == ["T00004"]
        assert [c.task_id for c in tx.cells(audit_id, kinds=["review"])] == ["T00001", "T00003", "T00005", "T00004"]
        assert tx.cells_by_id(audit_id, ["T00003"])["T00003"].packet_id == "A1-R1-P01"
        assert "T00002" not in tx.cells_by_id(audit_id, ["T00002"]) and tx.max_task_number(audit_id) == 5
        assert [c.state for c in tx.cells_for_path(audit_id, "b.py")] == ["assigned", "pending", "reviewed"]


def test_many_cells_updated_at_once_rows_and_implied_cells_alike_the_last_update_of_a_task_winning(
    store: Store,
) -> None:
    audit_id = _audit(store)
    units = [(f"f{i:04d}.py", 1, 3, f"h{i}", 0) for i in range(1_200)]  # more cells than one statement binds
    with store.write() as tx:
        assert tx.insert_matrix(audit_id, Matrix(units=units, lens_sets=[["security"]]), NOW) == 1_200
        cells = tx.cells_by_id(audit_id, [f"T{n:05d}" for n in range(1, 1_101)])
        tx.assign_cells(audit_id, "A1-R1", "A1-R1-P01", cells.values(), NOW)  # 1,100 rows, 100 implied
        tx.update_cells(
            audit_id,
            [
                *(CellUpdate(f"T{n:05d}", "reviewed", "A1-R1", "A1-R1-P01") for n in range(601, 1_001)),
                CellUpdate("T00007", "not_applicable", "A1-R1", "A1-R1-P01", "generated"),  # wins over its batch
                CellUpdate("T01050", "pending", None, None, "timeout: try again", 1),
                CellUpdate("T01150", "failed", None, None, "gave up", 3),  # implied until now
            ],
            NOW,
            [  # many cells given one state each: applied first, and a later batch wins over an earlier one
                CellBatch([f"T{n:05d}" for n in range(1, 651)], "not_applicable", "A1-R1", "A1-R1-P01"),
                CellBatch([f"T{n:05d}" for n in range(1, 601)], "reviewed", "A1-R1", "A1-R1-P01"),
                CellBatch(["T01160"], "reviewed", "A1-R1", "A1-R1-P01"),  # implied until now
            ],
        )
    with store.read() as tx:
        assert tx.cell_counts(audit_id) == {
            "reviewed": 1_000,
            "not_applicable": 1,
            "assigned": 99,
            "pending": 99,
            "failed": 1,
        }
        assert tx.cells_by_id(audit_id, ["T01160"])["T01160"].packet_id == "A1-R1-P01"
        got = tx.cells_by_id(audit_id, ["T00001", "T00007", "T01050", "T01150", "T01151"])
        assert (got["T00001"].state, got["T00001"].packet_id, got["T00001"].reason) == ("reviewed", "A1-R1-P01", None)
        assert (got["T00007"].state, got["T00007"].reason) == ("not_applicable", "generated")
        assert (got["T01050"].state, got["T01050"].attempts, got["T01050"].run_id) == ("pending", 1, None)
        assert (got["T01150"].state, got["T01150"].attempts) == ("failed", 3)
        assert got["T01151"].state == "pending" and got["T01151"].attempts == 0


def test_a_files_status_record_round_trips(store: Store) -> None:
    audit_id = _audit(store)
    with store.write() as tx:
        row = tx.file(audit_id, "a.py")
        assert row is not None and row.stat is None
        tx.update_file(audit_id, FileRow("a.py", "python", 10, 3, "h1", "review", None, "source", "1:2:10:3:4:r"))
    with store.read() as tx:
        assert [f.stat for f in tx.files(audit_id)] == ["1:2:10:3:4:r", None, None]
        assert tx.file(audit_id, "a.py") == FileRow("a.py", "python", 10, 3, "h1", "review", None, "source")


def test_runs_packets_submissions_findings_verdicts_ledger_and_requeues(store: Store) -> None:
    audit_id = _audit(store)
    with store.write() as tx:
        tx.insert_cells(
            audit_id, [Cell("T00001", "a.py", 1, 3, "security", "assigned", 0, "A1-R1", "A1-R1-P01", None, "h1")], NOW
        )
        tx.insert_run(RunRow("A1-R1", audit_id, 1, "dispatch", "open", NOW, None, 2, {"waves": [[1]]}))
        tx.insert_packet(
            audit_id, PacketRow("A1-R1-P01", "A1-R1", 1, "issued", 900, "standard", "why", "/p.md"), ["T00001"]
        )
        tx.lease_packets("A1-R1", "2026-01-02T05:00:00Z")
        tx.put_submission("A1-R1-P01", "A1-R1", "dig", {"results": [1]}, NOW)
        tx.put_submission("A1-R1-P01", "A1-R1", "dig2", {"results": [2]}, NOW, origin="file")  # replaces
        tx.put_submission(
            "A1-R1-P02", "A1-R1", "dig3", '{"results": [3], "usage": null}', NOW, parts={"reviewed": ["T1"]}
        )
        tx.insert_finding(audit_id, "A1-R1", "A1-R1-P01", "T00001", "security", {"title": "t"})
        tx.insert_failure(audit_id, "A1-R1", "A1-R1-P01", "timeout", "slow", NOW)
        tx.insert_verdict(audit_id, Verdict("L001", "confirmed", "seen", "A1-R1-P01", "T00001"))
        tx.insert_verdict(audit_id, Verdict("L001", "refuted", "not so", "A1-R1-P01", "T00001"))  # upsert
        tx.log(now=NOW, audit_id=audit_id, actor="engine", action="dispatch", detail="50% done", outcome="ok")
        tx.add_requeue(audit_id, ["T00001"], "look again", "person", NOW)
    with store.read() as tx:
        run = tx.run("A1-R1")
        assert run is not None and run.plan == {"waves": [[1]]} and tx.run("A1-R1", plan=False).plan == {}  # type: ignore[union-attr]
        assert tx.submission("A1-R1-P01") == ("dig2", {"results": [2]})
        assert tx.submission("A1-R1-P02") == ("dig3", {"results": [3], "usage": None})  # stored as given
        # What merging needs: the parts kept with a submission, or its whole payload when none were kept.
        assert tx.run_merge_parts("A1-R1") == {"A1-R1-P01": {"results": [2]}, "A1-R1-P02": {"reviewed": ["T1"]}}
        assert tx.submission_record("A1-R1-P01") == {"accepted_at": NOW, "origin": "file", "digest": "dig2"}
        assert tx.expired_packet_ids("A1-R1", "2026-01-02T06:00:00Z") == []  # submitted
        assert tx.packet_task_ids("A1-R1-P01") == ["T00001"]
        assert [f["title"] for f in tx.findings(audit_id)] == ["t"]
        assert tx.failures(audit_id)[0]["kind"] == "timeout"
        assert tx.verdicts(audit_id) == [Verdict("L001", "refuted", "not so", "A1-R1-P01", "T00001")]
        assert tx.ledger(audit_id)[0]["detail"] == "50% done"
        assert tx.open_requeues(audit_id, ["T00001"]) == {"T00001": ["look again"]}


def test_a_failed_write_leaves_nothing_and_a_read_sees_one_snapshot(store: Store) -> None:
    audit_id = _audit(store)
    with pytest.raises(RuntimeError), store.write() as tx:
        tx.set_blocker(audit_id, "half-done")
        raise RuntimeError("crash inside the transaction")
    with store.read() as tx:
        current = tx.current_audit()
        assert current is not None and current.blocker is None
        with store.write() as writer:
            writer.set_blocker(audit_id, "later")
        again = tx.current_audit()
        assert again is not None and again.blocker is None  # the snapshot does not move
    assert "0008_requeues_and_abandon" in store.applied_migrations()


def test_sql_is_translated_for_postgres_outside_quotes_only() -> None:
    assert to_postgres("SELECT * FROM t WHERE a = ? AND b LIKE 'x%?'", parameters=True) == (
        "SELECT * FROM t WHERE a = %s AND b LIKE 'x%%?'"
    )
    assert to_postgres("SELECT '100%'", parameters=False) == "SELECT '100%'"
    assert to_postgres(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, s TEXT DEFAULT 'INTEGER')", parameters=False
    ) == (
        "CREATE TABLE t (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, n BIGINT,"
        " s TEXT COLLATE \"C\" DEFAULT 'INTEGER')"
    )
    # Text compares by code point, as in SQLite, whatever the database's default collation; a column that
    # names its collation keeps it.
    assert (
        to_postgres("ALTER TABLE t ADD COLUMN u TEXT", parameters=False)
        == 'ALTER TABLE t ADD COLUMN u TEXT COLLATE "C"'
    )
    assert (
        to_postgres('CREATE TABLE v (w TEXT COLLATE "de_DE")', parameters=False)
        == 'CREATE TABLE v (w TEXT COLLATE "de_DE")'
    )
    assert to_postgres("SELECT CAST(n AS TEXT) FROM t", parameters=False) == "SELECT CAST(n AS TEXT) FROM t"
    # SQLite's storage clause has no PostgreSQL meaning (its tables have no row id): it is dropped.
    assert (
        to_postgres(
            "CREATE TABLE k (a TEXT NOT NULL, note TEXT DEFAULT 'WITHOUT ROWID', PRIMARY KEY (a))\n) without  rowid",
            parameters=False,
        )
        == 'CREATE TABLE k (a TEXT COLLATE "C" NOT NULL, note TEXT COLLATE "C" DEFAULT \'WITHOUT ROWID\','
        " PRIMARY KEY (a))\n)"
    )


def test_store_urls_and_identities() -> None:
    assert store_kind(None) == store_kind("sqlite") == "sqlite"
    assert store_kind("postgresql://u@h/db") == store_kind("postgres://h/db") == "postgresql"
    with pytest.raises(ConfigError, match="unknown store 'mysql://u@h/db'"):
        store_kind("mysql://u:secret@h/db")
    assert redact("postgresql://u:secret@h:5432/db") == "postgresql://u@h:5432/db"
    assert normalize_remote("git@github.com:Org/Repo.git") == normalize_remote("https://tok:x@GitHub.com/Org/Repo/")
    assert normalize_remote("ssh://git@github.com/Org/Repo.git") == "github.com/Org/Repo"


def test_store_verbs_init_migrate_and_status_on_either_backend(
    repo: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from audit_mcp.surfaces.cli import main

    assert main(["store", "status", "--root", str(repo)]) == 0
    before = json.loads(capsys.readouterr().out)
    assert before["migrations_applied"] == [] and before["migrations_pending"][0] == "0001_initial"
    assert not (repo / ".audit-mcp" / "audit.sqlite3").exists()  # status changes nothing
    assert main(["store", "init", "--root", str(repo)]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["migrations_pending"] == [] and made["applied_now"] == made["migrations_applied"]
    assert made["backend"] == ("sqlite" if store_url == "sqlite" else "postgresql")
    assert main(["store", "migrate", "--root", str(repo)]) == 0
    assert json.loads(capsys.readouterr().out)["applied_now"] == []
    AuditService(repo).next_step({"can_dispatch_subagents": True})
    assert main(["store", "status", "--root", str(repo)]) == 0
    after = json.loads(capsys.readouterr().out)
    assert after["audits"] == [1]
    if store_url != "sqlite":
        assert [r["label"] for r in after["repositories"]] == [after["repository"]]


def test_a_runs_launch_order_is_read_out_of_its_plan(store: Store) -> None:
    audit_id = _audit(store)
    order = ["A1-R1-P02", "A1-R1-P01"]
    with store.write() as tx:
        tx.insert_run(RunRow("A1-R1", audit_id, 1, "dispatch", "open", NOW, None, 2, {"launch_order": order}))
        tx.insert_run(RunRow("A1-R2", audit_id, 2, "dispatch", "open", NOW, None, 2, {"waves": []}))
    with store.read() as tx:
        assert tx.launch_order("A1-R1") == order
        assert tx.launch_order("A1-R2") == [] and tx.launch_order("A1-R9") == []


def test_a_write_that_only_records_an_answer_keeps_the_queue_generation(store: Store) -> None:
    audit_id = _audit(store)
    with store.read() as tx:
        (origin, n), queue = tx.generation(), tx.queue_generation()
    assert queue[0] == origin
    with store.write() as tx:
        tx.records_answer_only()
        tx.log(now=NOW, audit_id=audit_id, actor="subagent", action="submit_packet", detail="P1", outcome="accepted")
    with store.read() as tx:
        assert tx.generation() == (origin, n + 1) and tx.queue_generation() == queue
    with store.write() as tx:
        tx.log(now=NOW, audit_id=audit_id, actor="engine", action="test", detail="any other write", outcome="ok")
    with store.read() as tx:
        assert tx.generation() == (origin, n + 2) and tx.queue_generation() == (origin, queue[1] + 1)


def test_every_write_raises_the_generation_and_a_new_database_has_a_new_origin(
    store: Store, store_url: str, tmp_path: Path
) -> None:
    with store.read() as tx:
        origin, start = tx.generation()
    assert origin and start >= 0
    audit_id = _audit(store)
    with store.read() as tx:
        assert tx.generation() == (origin, start + 1)
    with pytest.raises(RuntimeError), store.write() as tx:
        tx.log(now=NOW, audit_id=audit_id, actor="engine", action="test", detail="rolled back", outcome="ok")
        raise RuntimeError("rolled back")
    with store.read() as tx:
        assert tx.generation() == (origin, start + 1), "a rolled-back write changes nothing, the generation neither"
    with store.write() as tx:
        tx.log(now=NOW, audit_id=audit_id, actor="engine", action="test", detail="kept", outcome="ok")
    with store.read() as tx:
        assert tx.generation() == (origin, start + 2)
    if store_url == "sqlite":  # the same path, a database made again: never mistaken for the old one
        store.close()
        for f in (tmp_path / "artifacts").glob("audit.sqlite3*"):
            f.unlink()
        again = open_store(None, tmp_path / "artifacts", lambda: IDENTITY)
        with again.read() as tx:
            assert tx.generation()[0] != origin
        again.close()


def test_a_whole_run_written_at_once_gives_each_packet_its_tasks_cells_and_leads(store: Store) -> None:
    audit_id = _audit(store)
    matrix = Matrix(
        units=[("a.py", 1, 3, "h1", 0), ("b.py", 1, 6, "h2", 1)], lens_sets=[["security"], ["security", "correctness"]]
    )
    lead = Lead("L001", "semgrep", "r1", "b.py", 2, 2, "warning", "m")
    with store.write() as tx:
        tx.insert_matrix(audit_id, matrix, NOW)
        tx.insert_leads(audit_id, [lead])
        # A cell tried once before has a row (the others are implied): assignment updates it in place.
        tx.update_cell(audit_id, "T00002", state="pending", now=NOW, attempts=1, reason="timeout: try again")
        cells = tx.cells_by_id(audit_id, ["T00001", "T00002", "T00003"])
        tx.insert_run(RunRow("A1-R1", audit_id, 1, "dispatch", "open", NOW, None, 2, {"waves": [2]}))
        first = PacketRow("A1-R1-P01", "A1-R1", 1, "issued", 900, "standard", "why", "/p1.md")
        second = PacketRow("A1-R1-P02", "A1-R1", 2, "issued", 800, "small", "why", "/p2.md")
        tx.insert_packets(audit_id, [(first, ["T00001"]), (second, ["T00002", "T00003"])])
        tx.assign_run_leads({"A1-R1-P01": [], "A1-R1-P02": ["L001"]})
        tx.assign_run_cells(
            audit_id, "A1-R1", {"A1-R1-P01": [cells["T00001"]], "A1-R1-P02": [cells["T00002"], cells["T00003"]]}, NOW
        )
    with store.read() as tx:
        assert [p.packet_id for p in tx.packets("A1-R1")] == ["A1-R1-P01", "A1-R1-P02"]
        assert tx.packet("A1-R1-P02") == second
        assert tx.packet_task_ids("A1-R1-P01") == ["T00001"]
        assert sorted(tx.packet_task_ids("A1-R1-P02")) == ["T00002", "T00003"]
        got = tx.cells_by_id(audit_id, ["T00001", "T00002", "T00003"])
        assert {t: (c.state, c.packet_id, c.run_id, c.attempts) for t, c in got.items()} == {
            "T00001": ("assigned", "A1-R1-P01", "A1-R1", 0),
            "T00002": ("assigned", "A1-R1-P02", "A1-R1", 1),
            "T00003": ("assigned", "A1-R1-P02", "A1-R1", 0),
        }
        assert tx.leads(audit_id, "A1-R1-P01") == [] and tx.leads(audit_id, "A1-R1-P02") == [lead]
        assert tx.cell_counts_by_kind(audit_id)["review"] == {"assigned": 3}
