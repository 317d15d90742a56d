"""In a shared store a checkout joins the audit of its repository's identity, not of its path."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from audit_mcp.core.errors import ConfigError
from audit_mcp.usecases.identity import repo_identity
from audit_mcp.usecases.service import AuditService
from tests.conftest import git

CAPS = {"can_dispatch_subagents": True}


def _run_id(root: Path, store: str, audit_name: str | None = None) -> str | None:
    service = AuditService(root, store=store, audit_name=audit_name)
    try:
        return service.next_step(CAPS).run_id
    finally:
        service.store.close()


def test_clones_with_the_same_origin_find_one_audit_and_another_repository_its_own(
    repo: Path, tmp_path: Path, pg_url: str
) -> None:
    git(repo, "remote", "add", "origin", "git@github.com:example/planted.git")
    clone = tmp_path / "elsewhere" / "planted"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True, capture_output=True)
    git(clone, "remote", "set-url", "origin", "https://ci-token@github.com/example/planted")
    assert repo_identity(repo, None) == repo_identity(clone, None)
    assert _run_id(repo, pg_url) == _run_id(clone, pg_url)
    other = tmp_path / "other"
    shutil.copytree(repo, other)
    git(other, "remote", "set-url", "origin", "git@github.com:example/fork.git")
    assert repo_identity(other, None) != repo_identity(repo, None)
    with AuditService(other, store=pg_url).store.read() as tx:
        assert tx.current_audit() is None  # a fork with the same history is another audit


def test_an_audit_name_joins_checkouts_without_git_and_a_nameless_one_is_told_to_name_it(
    plain_repo: Path, tmp_path: Path, pg_url: str
) -> None:
    with pytest.raises(ConfigError, match=r"no git history.*--audit-name NAME"):
        AuditService(plain_repo, store=pg_url)
    copy = tmp_path / "copy"
    shutil.copytree(plain_repo, copy)
    assert _run_id(plain_repo, pg_url, audit_name="monorepo-web") == _run_id(copy, pg_url, audit_name="monorepo-web")
    with AuditService(copy, store=pg_url, audit_name="monorepo-api").store.read() as tx:
        assert tx.current_audit() is None
