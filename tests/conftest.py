"""Shared fixtures: a git copy of the planted fixture repo, its answer key, and a scripted reviewer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.surfaces.scripted import AnswerKeyReviewer
from tests.pg_server import PgServer, pg_bindir

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", "-c", "init.defaultBranch=main", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


@pytest.fixture(autouse=True)
def _isolated_learned_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Learned rate-limit state goes to a temporary directory, never the user's; no provider is probed."""
    monkeypatch.setenv("AUDIT_MCP_STATE_DIR", str(tmp_path / "learned-state"))
    monkeypatch.setenv("AUDIT_MCP_PROBE", "never")
    # The store is SQLite in the artifacts directory unless a test asks for PostgreSQL (``store_url``).
    monkeypatch.delenv("AUDIT_MCP_STORE", raising=False)
    monkeypatch.delenv("AUDIT_MCP_AUDIT_NAME", raising=False)


_POOLS: weakref.WeakSet[Any] = weakref.WeakSet()


def close_pools(dsn: str | None = None) -> None:
    """Close the connection pools of the stores tests opened (those on ``dsn``'s database only, when given) and did not
    close. A pool left open on a database that is then dropped, or on a server that is stopped, retries its
    connections in a thread for minutes, drawing jitter from the global ``random``, which Hypothesis reports
    as a strategy using it in any test that runs meanwhile."""
    from psycopg.conninfo import conninfo_to_dict

    wanted = None if dsn is None else conninfo_to_dict(dsn).get("dbname")
    for pool in list(_POOLS):
        if wanted is None or conninfo_to_dict(pool.conninfo).get("dbname") == wanted:
            pool.close(timeout=5)
            _POOLS.discard(pool)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One throwaway PostgreSQL server for the whole test run (skipped only where none is installed; CI
    installs one and sets AUDIT_MCP_REQUIRE_POSTGRES, so there a missing server fails instead). Every
    store's connection pool opened meanwhile is tracked, so ``close_pools`` can close those left open."""
    bindir = pg_bindir()
    if bindir is None:
        if os.environ.get("AUDIT_MCP_REQUIRE_POSTGRES"):
            pytest.fail("AUDIT_MCP_REQUIRE_POSTGRES is set but no PostgreSQL binaries (initdb, pg_ctl) were found")
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl) on this machine: apt-get install postgresql")
    from psycopg_pool import ConnectionPool

    import audit_mcp.store.postgres as postgres

    class TrackedPool(ConnectionPool):  # type: ignore[type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            _POOLS.add(self)

    server = PgServer(bindir).start()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(postgres, "ConnectionPool", TrackedPool)
        try:
            yield server
        finally:
            close_pools()
            server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh, empty database on the test run's server, dropped after the test."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield pg_server.dsn(name)
    close_pools(pg_server.dsn(name))
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each backend in turn, through AUDIT_MCP_STORE (which child processes inherit): ``sqlite`` or a
    fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return "sqlite"
    url: str = request.getfixturevalue("pg_url")
    monkeypatch.setenv("AUDIT_MCP_STORE", url)
    return url


@pytest.fixture
def answer_key() -> dict[str, Any]:
    return json.loads((FIXTURES / "planted_app.answer-key.json").read_text())


@pytest.fixture
def plain_repo(tmp_path: Path) -> Path:
    """The planted fixture as a plain directory (no git), with an ignored log file beside it."""
    root = tmp_path / "planted_app"
    # What a person's own run left in the fixture (its artifacts directory) is never part of the copy.
    shutil.copytree(FIXTURES / "planted_app", root, ignore=shutil.ignore_patterns(".audit-mcp"))
    (root / "debug.log").write_text("request served\n")
    return root


@pytest.fixture
def repo(plain_repo: Path) -> Iterator[Path]:
    """The planted fixture as a committed git repository."""
    git(plain_repo, "init", "-q")
    git(plain_repo, "add", "-A")
    git(plain_repo, "commit", "-qm", "fixture")
    yield plain_repo


class ScriptedReviewer(AnswerKeyReviewer):
    """Answers packets honestly from the answer key: the planted issue when a task covers it, else a
    summary of what a reviewer would have read; context and verification packets from the key too (its
    threat model; planted defects confirmed). It stands in for the host's subagents. The key's decoys
    (reports a verifier refutes) are left out unless ``decoys`` is set."""

    def __init__(self, answer_key: dict[str, Any], *, decoys: bool = False) -> None:
        super().__init__(answer_key, decoys=decoys)

    def review_summary(self, task: Mapping[str, Any]) -> str:
        return (
            f"Read {task['file']} lines {task['start_line']}-{task['end_line']} in full under "
            f"the {task['lens']} lens and traced its inputs to their uses."
        )


@pytest.fixture
def reviewer(answer_key: dict[str, Any]) -> ScriptedReviewer:
    return ScriptedReviewer(answer_key)


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless Chromium for the whole test run (skipped only where none is installed; CI installs one and
    sets AUDIT_MCP_REQUIRE_CHROMIUM, so there a missing browser fails instead)."""
    from tests.browser import REQUIRE_ENV, binaries, chromium, required

    if binaries() is None:
        if required():
            pytest.fail(f"{REQUIRE_ENV} is set but chromium or chromedriver is missing")
        pytest.skip("no chromium and chromedriver on this machine: apt-get install chromium chromium-driver")
    with chromium(tmp_path_factory.mktemp("chromium") / "profile") as session:
        yield session
