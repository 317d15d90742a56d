"""``audit-mcp store init|migrate|status``: the store a checkout uses, its migrations and what it holds.

``init`` creates the store's schema (for PostgreSQL: the shared ``audit_mcp`` schema and this
repository's) and applies every migration; ``migrate`` applies the ones still pending and names them;
``status`` only looks: backend, location, migrations applied and pending, audits, and (for a shared
store) every repository it holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audit_mcp.store.backends import open_store
from audit_mcp.store.identity import RepoIdentity, store_kind
from audit_mcp.store.migrations import MIGRATIONS
from audit_mcp.usecases import artifacts as artifacts_folder
from audit_mcp.usecases.identity import repo_identity
from audit_mcp.usecases.workspace import store_settings


def store_command(
    action: str,
    root: Path,
    artifacts_dir: Path | None,
    *,
    config_path: Path | None = None,
    store: str | None = None,
    audit_name: str | None = None,
) -> dict[str, Any]:
    root = root.expanduser().resolve()
    url, name = store_settings(root, config_path, store, audit_name)
    chosen = artifacts_folder.choose(root, artifacts_dir.expanduser().resolve() if artifacts_dir else None)
    artifacts = chosen.path
    shared = store_kind(url) == "postgresql"
    if not shared and action != "status":
        artifacts_folder.ensure(chosen)  # the database goes into a folder sealed as this user's
    identity = repo_identity(root, name) if shared else None

    def identify() -> RepoIdentity:
        assert identity is not None  # only a shared store asks
        return identity

    before = open_store(url, artifacts, identify, migrate=False)
    try:
        applied_before = before.applied_migrations()
    finally:
        before.close()
    opened = open_store(url, artifacts, identify, migrate=action != "status")
    try:
        applied = opened.applied_migrations()
        audits: list[int] = []
        if applied:
            with opened.read() as tx:
                audits = tx.audit_ids()
        view: dict[str, Any] = {
            "action": action,
            "backend": store_kind(url),
            "location": opened.location,
            "repository": identity.label if identity else str(root),
            "migrations_applied": applied,
            "migrations_pending": [n for n, _ in MIGRATIONS if n not in applied],
            "audits": audits,
            "repositories": opened.repositories(),
        }
        if action != "status":
            view["applied_now"] = [n for n in applied if n not in applied_before]
        return view
    finally:
        opened.close()
