"""Paths order the same way in every store: a PostgreSQL database whose default collation is linguistic
(the default of most installations) plans, packs and completes an audit exactly as SQLite does."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.store.postgres import PostgresStore
from audit_mcp.usecases.service import AuditService
from tests.conftest import close_pools, git
from tests.driving import first_review, opinions, read_launch_lists
from tests.pg_server import PgServer

# Names whose order by code point differs from a linguistic order: case, punctuation, digits, accents.
NAMES = [
    "Zeta.py", "alpha.py", "Beta/x.py", "beta.py", "a-b.py", "a_b.py", "a.b.py", "ab.py", "a/b.py",
    "B10.py", "b9.py", "_private.py", "émile.py", "eagle.py", "Émile2.py", "x y.py", "x-y/z.py", "xy.py",
]  # fmt: skip
CONFIG_NAME = ".audit-mcp.toml"
CONFIG = "context_pass = false\nverification_pass = false\nmax_packet_tokens = 4000\nmax_packets_per_run = 8\n"


@pytest.fixture
def linguistic_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh database whose default collation is ICU's English one."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute(
            f"CREATE DATABASE \"{name}\" TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
        )
        with psycopg.connect(pg_server.dsn(name)) as check:
            assert check.execute("SELECT 'B' < 'a'").fetchone() == (False,)  # linguistic indeed
    yield pg_server.dsn(name)
    close_pools(pg_server.dsn(name))
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _repo(root: Path) -> Path:
    for n, name in enumerate(NAMES):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        body = "".join(f"def handler_{n}_{k}(request):\n    return request.args.get('q{k}')\n\n" for k in range(30))
        path.write_text(body)
    (root / CONFIG_NAME).write_text(CONFIG)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    return root


def _runs(service: AuditService, step: Any) -> list[list[tuple[str, int, int, str]]]:
    """Every run's packets to the end of the audit, each as its tasks (file, lines, lens); the first run's
    second packet is never answered, so its cells are requeued and packed again among the pending ones."""
    runs: list[list[tuple[str, int, int, str]]] = []
    for n in range(40):
        if step.step_kind != "dispatch_review" or step.run_id is None:
            break
        plan = json.loads(service.plan_path(step.run_id).read_text())
        runs.extend(
            [(t["file"], t["start_line"], t["end_line"], t["lens"]) for t in p["tasks"]] for p in plan["packets"]
        )
        step = _answer_run(service, step, plan["packets"][1]["packet_id"] if n == 0 else None)
    assert step.step_kind == "present_report", step.step_kind
    return runs


def _answer_run(service: AuditService, step: Any, skip: str | None) -> Any:
    """Answer and merge this run only (all but packet ``skip``); the next step."""
    read_launch_lists(service, step)
    plan = json.loads(service.plan_path(step.run_id).read_text())
    for packet in plan["packets"]:
        if packet["packet_id"] == skip:
            continue
        receipt = service.submit_packet(plan["run_id"], packet["packet_id"], opinions().results(packet))
        assert receipt.accepted, receipt.errors
    service.merge_and_ingest(plan["run_id"], [])
    return service.next_step({})


def test_a_linguistic_postgresql_database_plans_and_completes_an_audit_exactly_as_one_ordered_by_code_point(
    tmp_path: Path, pg_url: str, linguistic_url: str
) -> None:
    # The test server's databases order text by code point (C.UTF-8), as SQLite does.
    repo = _repo(tmp_path / "repo")
    other = tmp_path / "copy"
    shutil.copytree(repo, other)
    # Intake in one process, planning in the next: the plan reads the manifest back from the store.
    AuditService(repo, tmp_path / "art-c", store=pg_url).run_stage("intake")
    AuditService(other, tmp_path / "art-icu", store=linguistic_url).run_stage("intake")
    by_code_point = AuditService(repo, tmp_path / "art-c", store=pg_url)
    linguistic = AuditService(other, tmp_path / "art-icu", store=linguistic_url)
    caps = {"can_dispatch_subagents": True, "max_active_subagents": 2}
    expected = _runs(by_code_point, first_review(by_code_point, caps))
    got = _runs(linguistic, first_review(linguistic, caps))
    assert len(expected) > 12, "the audit should take several runs of several packets"
    assert got == expected
    for service in (by_code_point, linguistic):
        assert service.status().completeness == "complete"


def _linguistic_columns(url: str, schema: str) -> list[tuple[str, str]]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s"
            " AND data_type = 'text' AND collation_name IS DISTINCT FROM 'C' ORDER BY 1, 2",
            (schema,),
        ).fetchall()
    return [(str(t), str(c)) for t, c in rows]


def test_a_store_made_before_its_text_was_ordered_by_code_point_is_converted_when_it_is_opened(
    tmp_path: Path, linguistic_url: str
) -> None:
    import psycopg

    repo = _repo(tmp_path / "repo")
    service = AuditService(repo, tmp_path / "art", store=linguistic_url)
    service.run_stage("intake")
    store = service.store
    assert isinstance(store, PostgresStore)
    schema = store.schema
    assert _linguistic_columns(linguistic_url, schema) == []
    # As an older version left it: the paths compared by the database's default (linguistic) collation.
    with psycopg.connect(linguistic_url) as conn:
        for table in ("files", "units", "cells"):
            conn.execute(f'ALTER TABLE "{schema}".{table} ALTER COLUMN path TYPE TEXT COLLATE "default"')
    assert _linguistic_columns(linguistic_url, schema) == [("cells", "path"), ("files", "path"), ("units", "path")]
    reopened = AuditService(repo, tmp_path / "art", store=linguistic_url)
    with reopened.store.read() as tx:
        audit = tx.current_audit()
        assert audit is not None
        paths = [f.path for f in tx.files(audit.audit_id)]
    assert _linguistic_columns(linguistic_url, schema) == []
    assert paths == sorted(paths) and "B10.py" in paths and paths.index("B10.py") < paths.index("alpha.py")
