"""Opening the store a workspace uses: SQLite in the artifacts directory, or a shared PostgreSQL database.

Both backends run the same queries (``tx``) over the same schema (``migrations``) with the same
transactions: ``write`` (one writer of an audit at a time), ``claim`` (a write that locks only the rows
it changes, so hosts claiming packets do not queue behind each other), ``read`` (one snapshot) and ``aside``
(a write of derived data that raises no generation and waits for no writer).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from audit_mcp.core.errors import ConfigError
from audit_mcp.store.identity import RepoIdentity, store_kind
from audit_mcp.store.keyed import Documents
from audit_mcp.store.migrations import MIGRATIONS
from audit_mcp.store.sqlite import Store as SqliteStore
from audit_mcp.store.tx import Tx


class Store(Protocol):
    dialect: str
    location: str

    def write(self) -> AbstractContextManager[Tx]: ...

    def claim(self) -> AbstractContextManager[Tx]: ...

    def read(self) -> AbstractContextManager[Tx]: ...

    def aside(self, record: Callable[[Tx], None]) -> bool: ...

    def applied_migrations(self) -> list[str]: ...

    def close(self) -> None: ...

    def repositories(self) -> list[dict[str, str]]: ...


def open_store(
    url: str | None,
    artifacts_dir: Path,
    identity: Callable[[], RepoIdentity],
    migrations: tuple[tuple[str, str], ...] = MIGRATIONS,
    *,
    migrate: bool = True,
) -> Store:
    """The store ``url`` names (``None``: SQLite in ``artifacts_dir``); ``identity`` is asked only by a
    shared store, which keeps one audit per repository identity."""
    if store_kind(url) == "sqlite":
        return SqliteStore(artifacts_dir, migrations, migrate=migrate)
    assert url is not None
    try:
        from audit_mcp.store.postgres import PostgresStore
    except ImportError as exc:
        raise ConfigError(
            f"a PostgreSQL store needs the psycopg driver ({exc}); install it with "
            "`pip install 'psycopg[binary,pool]>=3.1'` (or, in audit-mcp's clone, "
            "`pip install '.[postgresql]'`)"
        ) from exc
    return PostgresStore(url.strip(), identity(), migrations, migrate=migrate)


def shared_documents(store: Store) -> Documents | None:
    """The shared store's table of keyed documents (for learned rate-limit state), or ``None`` for SQLite."""
    if store.dialect != "postgresql":
        return None
    from audit_mcp.store.postgres import PostgresStore
    from audit_mcp.store.shared_documents import SharedDocuments

    assert isinstance(store, PostgresStore)
    return SharedDocuments(store)
