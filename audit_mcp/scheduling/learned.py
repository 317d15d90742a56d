"""Learned rate-limit state per provider+model, in a small SQLite file outside any repository.

The file lives under the user's state directory (``$XDG_STATE_HOME/audit-mcp``
or ``~/.local/state/audit-mcp``); ``AUDIT_MCP_STATE_DIR`` overrides the
directory. Every update is a read-modify-write inside one transaction
(``store.keyed``), so concurrent processes serialise and lose nothing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from audit_mcp.scheduling.profile import Learned
from audit_mcp.store.keyed import KeyedDocuments

STATE_FILENAME = "learned.sqlite3"
_DATES = {f.name for f in fields(Learned) if "datetime" in str(f.type)}


def learned_state_path() -> Path:
    """Where learned rate-limit state lives: per user, outside any repository."""
    base = os.environ.get("AUDIT_MCP_STATE_DIR")
    if base:
        return Path(base).expanduser() / STATE_FILENAME
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "audit-mcp" / STATE_FILENAME


def state_key(provider: str, model: str) -> str:
    return f"{provider}/{model}".lower()


def _encode(learned: Learned) -> str:
    data = asdict(learned)
    for name in _DATES:
        if data[name] is not None:
            data[name] = data[name].isoformat()
    return json.dumps(data, sort_keys=True)


def _decode(text: str) -> Learned:
    data: dict[str, Any] = json.loads(text)
    known = {f.name for f in fields(Learned)}
    data = {k: v for k, v in data.items() if k in known}
    for name in _DATES:
        if data.get(name):
            data[name] = datetime.fromisoformat(data[name])
    return Learned(**data)


class LearnedStore:
    """The learned state of every provider+model, one document each in a small SQLite file."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or learned_state_path()
        self._documents = KeyedDocuments(self.path)

    def get(self, key: str) -> Learned:
        text = self._documents.get(key)
        return Learned() if text is None else _decode(text)

    def update(self, key: str, change: Callable[[Learned], Learned], now: datetime) -> Learned:
        """Apply ``change`` to the stored state atomically and return the result."""
        text = self._documents.update(
            key, lambda old: _encode(change(Learned() if old is None else _decode(old))), now.isoformat()
        )
        return _decode(text)
