"""The learned state every audit of the user shares cannot take the machine down.

A value that is not finite or not in its bounds, a naive time, a cooldown past any provider window, a
document that is not JSON, a file that is not a database: each is quarantined (or worked around) with a
note in ``quota``, and every audit goes on with the defaults.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from audit_mcp.scheduling.learned import LearnedDoc, LearnedStore, learned_state_path, state_key
from audit_mcp.scheduling.profile import Learned
from audit_mcp.surfaces.server import build_server
from tests.conftest import FIXTURES, ScriptedReviewer
from tests.driving import cli

KEY = state_key("anthropic", "claude-sonnet-4-6")
GOOD: dict[str, Any] = {"cap": 3.0, "updated_at": "2026-11-30T12:00:00+00:00", "clean_runs": 2}

POISONS: dict[str, str] = {
    "NaN cap": json.dumps({**GOOD, "cap": float("nan")}),
    "Infinity run seconds": json.dumps({**GOOD, "run_seconds": float("inf")}),
    "negative input ratio": json.dumps({**GOOD, "input_ratio": -4}),
    "huge observed limit": json.dumps({**GOOD, "observed_limits": {"input_tokens_per_minute": 10**30}}),
    "naive time": json.dumps({**GOOD, "updated_at": "2026-11-30T12:00:00"}),
    "cooldown for ever": json.dumps({**GOOD, "cooldown_until": "9999-12-31T00:00:00+00:00"}),
    "a string cap": json.dumps({**GOOD, "cap": "lots"}),
    "a size fit cut short": json.dumps({**GOOD, "size_fits": {"input_tokens": [1.0, 2.0]}}),
    "Infinity in a size fit": json.dumps({**GOOD, "size_fits": {"seconds": [1.0, 2.0, 4.0, float("inf"), 2.0, 4.0]}}),
    "not JSON": "{cap: 3",
    "a list": "[1, 2, 3]",
}


def _plant(text: str) -> Path:
    """Write a document straight into the learned-state file, as a bug or another tool might have."""
    path = learned_state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    LearnedStore(path).update(KEY, lambda s: replace(s, clean_runs=1), datetime(2026, 11, 30, tzinfo=UTC))
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE learned SET state = ? WHERE key = ?", (text, KEY))
    conn.close()
    return path


def _quarantined(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT reason FROM quarantine WHERE key = ?", (KEY,))]
    finally:
        conn.close()


@pytest.mark.parametrize("poison", sorted(POISONS))
def test_a_poisoned_learned_state_is_quarantined_and_every_audit_goes_on(
    poison: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _plant(POISONS[poison])
    roots = []
    for name in ("one", "two"):
        root = tmp_path / name
        shutil.copytree(FIXTURES / "planted_app", root)
        roots.append(str(root))
    model = ["--host-model", "claude-sonnet-4-6"]
    code, step = cli(capsys, "next-step", "--root", roots[0], "--host-can-dispatch-subagents", "true", *model)
    assert code == 0 and step["step_kind"] == "dispatch_review", step
    code, status = cli(capsys, "status", "--root", roots[0], "--json")
    assert code == 0 and status["audit_id"] == 1
    code, quota = cli(capsys, "quota", "--root", roots[1], *model)
    assert code == 0, quota
    assert any("set aside" in note and "defaults" in note for note in quota["notes"]), quota["notes"]
    assert quota["learned"]["learned_cap"] is None  # the defaults, not the poisoned value
    assert len(_quarantined(path)) == 1
    assert LearnedStore(path).get(KEY) == Learned()


def test_a_learned_state_file_that_is_not_a_database_is_worked_around(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = learned_state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"this is not sqlite\x00" * 100)
    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "planted_app", root)
    code, step = cli(capsys, "next-step", "--root", str(root), "--host-can-dispatch-subagents", "true")
    assert code == 0 and step["step_kind"] == "dispatch_review", step
    code, quota = cli(capsys, "quota", "--root", str(root))
    assert code == 0 and any("not a usable SQLite database" in n for n in quota["notes"]), quota["notes"]


def test_a_state_that_would_fail_its_check_is_never_written() -> None:
    store = LearnedStore()
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    store.update(KEY, lambda s: replace(s, cap=4.0, updated_at=now), now)
    kept = store.update(KEY, lambda s: replace(s, cap=float("nan"), run_seconds=float("inf")), now)
    assert kept.cap == 4.0 and store.get(KEY).cap == 4.0
    assert ["refused on write" in why for why in _quarantined(store.path)] == [True]


def test_what_runs_took_against_their_packets_sizes_survives_the_store() -> None:
    store = LearnedStore()
    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    fits = {
        "input_tokens": (1.9, 30_000.0, 5.0e8, 400_000.0, 7.0e9, 9.0e10),
        "seconds": (1.0, 12_000.0, 1.44e8, 150.0, 1.8e6, 22_500.0),
    }
    store.update(KEY, lambda s: replace(s, size_fits=fits, input_ratio=13.3, updated_at=now), now)
    assert store.get(KEY).size_fits == fits and store.get(KEY).input_ratio == 13.3


def test_the_check_covers_every_field_of_the_learned_state() -> None:
    assert {f.name for f in fields(Learned)} == set(LearnedDoc.model_fields)


@pytest.mark.anyio
async def test_hostile_retry_after_texts_cannot_set_a_cooldown_for_ever(repo: Path, reviewer: ScriptedReviewer) -> None:
    texts = [
        "429 Too Many Requests retry-after: nan",
        "429 Too Many Requests retry-after: 1e400",
        "429 Too Many Requests retry-after: 99999999999999",
        "429 rate limited anthropic-ratelimit-input-tokens-reset: 9999-12-31T23:59:59Z "
        "anthropic-ratelimit-input-tokens-remaining: 0",
        "429 rate limit, try again in 99999999999h",
        "429 x-ratelimit-limit-requests: 1e400 retry-after-ms: inf",
    ]
    async with Client(build_server(repo)) as client:
        args = {"host_can_dispatch_subagents": True, "host_max_active_subagents": 8, "host_model": "claude-sonnet-4-6"}
        step = (await client.call_tool("next_step", args)).structured_content
        assert step is not None
        plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
        failures = [
            {"packet_id": p["packet_id"], "error": texts[i % len(texts)]} for i, p in enumerate(plan["packets"])
        ]
        merged = await client.call_tool("merge_and_ingest", {"run_id": plan["run_id"], "failures": failures})
        assert not merged.is_error, merged.content
        for tool, arguments in (("quota_status", {"host_model": "claude-sonnet-4-6"}), ("audit_status", {})):
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result.content
        quota = (await client.call_tool("quota_status", {"host_model": "claude-sonnet-4-6"})).structured_content
        assert quota is not None and quota["learned"]["cooldown_until"] is not None
        until = datetime.fromisoformat(str(quota["learned"]["cooldown_until"]).replace("Z", "+00:00"))
        assert (until - datetime.now(UTC)).days <= 7
        step = (await client.call_tool("next_step", {})).structured_content
        assert step is not None and step["step_kind"] == "dispatch_review"


def test_the_demo_writes_nothing_into_the_users_learned_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    users = learned_state_path()
    code, _ = cli(capsys, "demo", "--dir", str(tmp_path / "demo"))
    assert code == 0
    assert not users.exists()
    assert (tmp_path / "demo" / "planted_app" / ".audit-mcp" / "learned.sqlite3").is_file()
