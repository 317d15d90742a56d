"""The roots a server serves: its own (``--root``) and those listed with ``--allow-root``, nothing else.

A ``root`` argument naming any other folder is refused before anything is written there. A run id names
its root: run ids carry their artifacts directory's tag, so they never repeat across roots, and every call
that names a run is routed to the root whose audit holds it, or refused with the places that were searched.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

from audit_mcp.core.errors import ConfigError, NotFoundError, StateError
from audit_mcp.store.sqlite import DB_FILENAME
from audit_mcp.usecases import artifacts
from audit_mcp.usecases.service import AuditService
from audit_mcp.usecases.workspace import Clock


class Registry:
    """The services of the served roots, opened on first use; the default root comes first."""

    def __init__(
        self,
        root: Path | None,
        artifacts_dir: Path | None,
        config_path: Path | None,
        clock: Clock | None,
        allowed: Sequence[Path] = (),
        store: tuple[str | None, str | None] = (None, None),
    ) -> None:
        self._store = store  # the store URL and audit name of every root's service (``None``: their defaults)
        self.default_root = (root or Path.cwd()).expanduser().resolve()
        self._artifacts_dir = artifacts_dir
        self._config_path = config_path
        self._clock = clock
        self.allowed = list(dict.fromkeys([self.default_root, *(Path(p).expanduser().resolve() for p in allowed)]))
        self._services: dict[Path, AuditService] = {}
        self._runs: dict[str, AuditService] = {}
        self._lock = threading.Lock()
        self.current: AuditService | None = None

    def get(self, root: str | None) -> AuditService:
        """The service of a served root (the default one for ``None``); any other folder is refused."""
        key = Path(root).expanduser().resolve() if root else self.default_root
        if key not in self.allowed:
            served = ", ".join(str(p) for p in self.allowed)
            raise ConfigError(
                f"{key} is not a root this server serves ({served}); nothing was written there. Audit it with "
                f"`audit-mcp next-step --root {key}`, or restart the server with `--allow-root {key}`."
            )
        with self._lock:
            if key not in self._services:
                # An explicit artifacts directory belongs to the default root; other roots use their own.
                artifacts = self._artifacts_dir if key == self.default_root else None
                self._services[key] = AuditService(
                    key,
                    artifacts,
                    config_path=self._config_path,
                    clock=self._clock,
                    store=self._store[0],
                    audit_name=self._store[1],
                )
            return self._services[key]

    def _shared(self) -> bool:
        """A shared store holds the audit of a root that was never opened here (another host started it)."""
        return bool(self._store[0] or os.environ.get("AUDIT_MCP_STORE", "").strip())

    def _database(self, root: Path) -> Path:
        explicit = self._artifacts_dir if root == self.default_root and self._artifacts_dir else None
        return artifacts.choose(root, Path(explicit).expanduser().resolve() if explicit else None).path / DB_FILENAME

    def holder(self, run_id: str) -> AuditService | None:
        """The service whose audit holds ``run_id``; ``None`` when no served root has it. Roots that have no
        audit yet are not opened (opening one would create its artifacts directory)."""
        with self._lock:
            if run_id in self._runs:
                return self._runs[run_id]
        found = [
            service
            for root in self.allowed
            if root in self._services or self._shared() or self._database(root).is_file()
            for service in [self.get(str(root))]
            if service.has_run(run_id)
        ]
        if len(found) > 1:
            raise StateError(
                f"run {run_id!r} exists in the audits of {', '.join(str(s.root) for s in found)}; run ids of "
                "this version never repeat, so these come from an older one. Finish them one root at a time "
                "with the CLI (`audit-mcp merge-and-ingest --root ROOT --run-id ...`)."
            )
        if not found:
            return None
        with self._lock:
            self._runs[run_id] = found[0]
        return found[0]

    def for_run(self, run_id: str) -> AuditService:
        """The service whose audit holds ``run_id``, or ``NotFoundError`` saying where it looked."""
        service = self.holder(run_id)
        if service is None:
            raise NotFoundError(self.unknown(run_id))
        return service

    def unknown(self, run_id: str) -> str:
        places = "; ".join(
            f"{root} ({'searched' if self._database(root).is_file() else 'no audit yet'})" for root in self.allowed
        )
        return (
            f"run {run_id!r} is not in any audit this server serves (it looked in: {places}); take run_id from "
            "the dispatch plan or the packet prompt you were given"
        )

    def roots(self) -> list[str]:
        """The repositories this server serves, the default first."""
        return [str(root) for root in self.allowed]
