"""Learned rate-limit state shared through the PostgreSQL store: one host's lesson is every host's."""

from __future__ import annotations

import dataclasses
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from audit_mcp.scheduling.learned import state_key
from audit_mcp.usecases.service import AuditService

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
KEY = state_key("anthropic", "claude-sonnet-4")


def _clone(repo: Path, where: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(repo), str(where)], check=True, capture_output=True)
    return where


def test_hosts_that_share_the_learned_state_learn_together_and_others_keep_their_own(
    repo: Path, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUDIT_MCP_SHARE_LEARNED", "true")
    a = AuditService(_clone(repo, tmp_path / "a"), store=pg_url)
    monkeypatch.setenv("AUDIT_MCP_STATE_DIR", str(tmp_path / "b-state"))  # B's own file would be elsewhere
    b = AuditService(_clone(repo, tmp_path / "b"), store=pg_url)
    assert "audit_mcp.learned" in a.learned.location == b.learned.location
    taught = a.learned.update(KEY, lambda old: dataclasses.replace(old, cap=3.0, last_429_at=NOW), NOW)
    assert taught.cap == 3.0
    assert b.learned.get(KEY).cap == 3.0  # A's 429 narrows B's next wave
    # A bad lesson is refused on write and set aside where every host sees it; the good state stays.
    kept = b.learned.update(KEY, lambda old: dataclasses.replace(old, cap=float("nan")), NOW)
    assert kept.cap == 3.0 and a.learned.get(KEY).cap == 3.0
    assert any("refused on write" in note for note in a.learned.notes(KEY))
    monkeypatch.delenv("AUDIT_MCP_SHARE_LEARNED")
    c = AuditService(_clone(repo, tmp_path / "c"), store=pg_url)
    assert c.learned.location.endswith("learned.sqlite3") and c.learned.get(KEY).cap is None
