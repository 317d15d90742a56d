"""Learned state: one SQLite file per user, keyed by provider+model, safe under concurrent updates."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from audit_mcp.scheduling.learned import LearnedStore, learned_state_path, state_key

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDIT_MCP_STATE_DIR", str(tmp_path / "state"))


def test_the_state_dir_override_decides_where_the_file_lives(tmp_path: Path) -> None:
    assert learned_state_path() == tmp_path / "state" / "learned.sqlite3"


def test_state_round_trips_per_provider_and_model() -> None:
    store = LearnedStore()
    key = state_key("anthropic", "Claude-Sonnet-4-6")
    store.update(
        key,
        lambda s: replace(
            s,
            cap=3.0,
            updated_at=NOW,
            cooldown_until=NOW + timedelta(minutes=1),
            observed_limits={"requests_per_minute": 50},
        ),
        NOW,
    )
    again = LearnedStore().get(key)
    assert again.cap == 3.0 and again.cooldown_until == NOW + timedelta(minutes=1)
    assert again.observed_limits == {"requests_per_minute": 50}
    assert store.get(state_key("openai", "gpt-5.5")).cap is None


def test_concurrent_processes_lose_no_update(tmp_path: Path) -> None:
    script = (
        "from dataclasses import replace\nfrom datetime import UTC, datetime\n"
        "from audit_mcp.scheduling.learned import LearnedStore\n"
        "store = LearnedStore()\n"
        "for _ in range(20):\n"
        "    store.update('k', lambda s: replace(s, clean_runs=s.clean_runs + 1), datetime.now(UTC))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script]) for _ in range(4)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    assert LearnedStore().get("k").clean_runs == 80
