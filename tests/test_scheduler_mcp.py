"""Over MCP: a throttled wave narrows the next one and sets a cooldown; clean waves widen it back."""

from __future__ import annotations

import itertools
import json
import math
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from audit_mcp.core.config import HostConfig
from audit_mcp.engine import hosts
from audit_mcp.scheduling.probe import probe
from audit_mcp.surfaces.cli import main
from audit_mcp.surfaces.server import build_server
from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer, git
from tests.driving import call_ok, first_review

START = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


async def _plan(client: Client, run_id: str) -> dict[str, Any]:
    result = await client.read_resource(f"audit://runs/{run_id}/dispatch-plan")
    return json.loads(result.contents[0].text)  # type: ignore[union-attr]


async def _clean_run(client: Client, reviewer: ScriptedReviewer, plan: dict[str, Any]) -> None:
    for packet in plan["packets"]:
        receipt = await call_ok(
            client,
            "submit_packet",
            {
                "run_id": plan["run_id"],
                "packet_id": packet["packet_id"],
                "results": reviewer.results(packet),
                "usage": {
                    "input_tokens": 6 * packet["estimated_tokens"],
                    "output_tokens": 3000,
                    "api_calls": 12,
                    "seconds": 200,
                },
            },
        )
        assert receipt["accepted"], receipt["errors"]
    await call_ok(client, "merge_and_ingest", {"run_id": plan["run_id"], "failures": []})


# Limits the account really has (configured): the host's four slots, not the limits, set the first width.
# These tests count what review runs teach the scheduler: no context or verification run between them.
REVIEW_ONLY = "context_pass = false\nverification_pass = false\n"
ROOMY = "[model]\nrequests_per_minute = 4000\ninput_tokens_per_minute = 2000000\noutput_tokens_per_minute = 400000\n"


@pytest.mark.anyio
async def test_a_throttled_wave_narrows_the_next_and_clean_waves_widen_it_back(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    # carry_forward off: the second audit below reviews everything again instead of keeping the first's cells.
    (repo / ".audit-mcp.toml").write_text(
        'lenses = ["security", "correctness"]\nmax_packet_tokens = 4000\ncarry_forward = false\n'
        # Only review runs: what each run teaches the scheduler is counted below, run by run.
        "context_pass = false\nverification_pass = false\n" + ROOMY
    )
    clock = FakeClock()
    async with Client(build_server(repo, clock=clock)) as client:
        await call_ok(client, "next_step", {"root": str(repo)})
        step = await call_ok(client, "next_step", {"host_can_dispatch_subagents": True, "host_max_active_subagents": 4})
        assert step["step_kind"] == "dispatch_review"
        assert step["forecast"]["packets"] == step["packets_outstanding"] >= 6
        assert step["forecast"]["waves"] == len(step["waves"]) and step["forecast"]["seconds_high"] > 0
        first = await _plan(client, step["run_id"])
        assert first["wave_size"] == 4 and first["launch_order"] == [p["packet_id"] for p in first["packets"]]
        before = await call_ok(client, "quota_status", {})
        assert before["learned"]["last_429_at"] is None
        # Every cell is out in the open run: nothing is left to forecast, and the packets shown are its own.
        assert before["forecast"]["packets"] == 0 and before["schedule"]["launch_order"] == first["launch_order"]

        await call_ok(
            client,
            "merge_and_ingest",
            {
                "run_id": first["run_id"],
                "failures": [
                    {"packet_id": p["packet_id"], "error": 'API Error: 429 {"type":"rate_limit_error"} retry-after: 45'}
                    for p in first["packets"]
                ],
            },
        )
        quota = await call_ok(client, "quota_status", {})
        assert quota["learned"]["last_429_at"] == "2026-11-30T12:00:00Z"
        assert quota["learned"]["cooldown_until"] == "2026-11-30T12:00:45Z"
        # One decrease for the wave, however many of its packets failed.
        assert quota["learned"]["max_safe_concurrency"] == 2 and quota["schedule"]["wave_size"] <= 2
        assert quota["learned_state_path"].startswith(str(repo.parent))

        step = await call_ok(client, "next_step", {})
        second = await _plan(client, step["run_id"])
        assert second["wave_size"] <= 2 < first["wave_size"]
        assert second["cooldown_until"] == "2026-11-30T12:00:45Z"
        prompt = Path(step["prompt_path"]).read_text()
        assert "Do not launch any subagent before 2026-11-30T12:00:45Z" in prompt
        assert "Launch order: as listed below" in prompt and "learned cap" in prompt
        assert step["cooldown_until"] == "2026-11-30T12:00:45Z"

        clock.now = START + timedelta(minutes=10)
        await _clean_run(client, reviewer, second)
        quota = await call_ok(client, "quota_status", {})
        # Each clean, well-used wave adds one: the run's waves of two widen it back to the host's four.
        assert quota["learned"]["max_safe_concurrency"] > 2 and quota["learned"]["cooldown_until"] is None
        assert quota["learned"]["max_safe_concurrency"] <= 4

        step = await call_ok(client, "next_step", {})
        assert step["step_kind"] == "present_report"
        clock.now = START + timedelta(minutes=20)
        step = await call_ok(client, "next_step", {"new_audit": True})
        third = await _plan(client, step["run_id"])
        assert third["wave_size"] > second["wave_size"] and third["cooldown_until"] is None
        await _clean_run(client, reviewer, third)
        quota = await call_ok(client, "quota_status", {})
        assert quota["learned"]["max_safe_concurrency"] == 4 and quota["learned"]["clean_runs"] == 2


@pytest.mark.anyio
async def test_a_throttled_wave_narrows_the_rest_of_its_own_run(repo: Path, reviewer: ScriptedReviewer) -> None:
    (repo / ".audit-mcp.toml").write_text(
        REVIEW_ONLY + 'lenses = ["security", "correctness"]\nmax_packet_tokens = 4000\n' + ROOMY
    )
    clock = FakeClock()
    async with Client(build_server(repo, clock=clock)) as client:
        await call_ok(client, "next_step", {"root": str(repo)})
        step = await call_ok(client, "next_step", {"host_can_dispatch_subagents": True, "host_max_active_subagents": 4})
        plan = await _plan(client, step["run_id"])
        ids = [p["packet_id"] for p in plan["packets"]]
        assert plan["wave_size"] == 4 and len(ids) >= 6
        # The first wave: one packet fails rate-limited, reported between waves; the rest wait.
        failed = {"packet_id": ids[0], "error": 'API Error: 429 {"type":"rate_limit_error"} retry-after: 30'}
        status = await call_ok(
            client, "plan_status", {"run_id": plan["run_id"], "failures": [failed], "launched": ids[:4]}
        )
        assert status["width"] == 2 < status["planned_width"] == 4 and status["failures_recorded"] == 1
        assert status["cooldown_until"] == "2026-11-30T12:00:30Z" and status["running"] == 3
        assert [w["packet_id"] for w in status["waiting"]] == ids[4:]
        assert "Keep 2 subagent(s) running" in status["next_action"] and "2026-11-30T12:00:30Z" in status["next_action"]
        # Reported again at the merge: remembered, not learned twice.
        again = await call_ok(client, "plan_status", {"run_id": plan["run_id"], "failures": [failed]})
        assert again["failures_recorded"] == 0 and again["width"] == 2
        # A host that asks for its step again mid-run is handed the same width and cooldown.
        resumed = await call_ok(client, "next_step", {})
        assert resumed["run_id"] == plan["run_id"] and resumed["wave_size"] == 2
        assert resumed["cooldown_until"] == "2026-11-30T12:00:30Z" and ids[0] not in json.dumps(resumed["waves"])
        for packet in plan["packets"][1:]:
            receipt = await call_ok(
                client,
                "submit_packet",
                {"run_id": plan["run_id"], "packet_id": packet["packet_id"], "results": reviewer.results(packet)},
            )
            assert receipt["accepted"]
        summary = await call_ok(client, "merge_and_ingest", {"run_id": plan["run_id"], "failures": []})
        assert summary["packets_failed"] == 1 and summary["failure_kinds"] == {"rate_limited": 1}
        quota = await call_ok(client, "quota_status", {})
        assert quota["learned"]["rate_limited_runs"] == 1 and quota["learned"]["max_safe_concurrency"] == 2


@pytest.mark.anyio
async def test_rate_limit_retries_reported_in_usage_narrow_the_next_wave_without_a_cooldown(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    # No input limit configured: the 429s say nothing about one, and the learned cap takes a quarter off.
    roomy_but_input = "[model]\nrequests_per_minute = 4000\noutput_tokens_per_minute = 400000\n"
    (repo / ".audit-mcp.toml").write_text(
        REVIEW_ONLY + 'lenses = ["security", "correctness"]\nmax_packet_tokens = 4000\n' + roomy_but_input
    )
    clock = FakeClock()
    async with Client(build_server(repo, clock=clock)) as client:
        await call_ok(client, "next_step", {"root": str(repo)})
        step = await call_ok(client, "next_step", {"host_can_dispatch_subagents": True, "host_max_active_subagents": 4})
        first = await _plan(client, step["run_id"])
        assert first["wave_size"] == 4
        for packet in first["packets"]:  # every packet got through, but a sixth of its calls were refused and retried
            receipt = await call_ok(
                client,
                "submit_packet",
                {
                    "run_id": first["run_id"],
                    "packet_id": packet["packet_id"],
                    "results": reviewer.results(packet),
                    "usage": {"input_tokens": 20_000, "api_calls": 12, "seconds": 600, "rate_limited_calls": 2},
                },
            )
            assert receipt["accepted"], receipt["errors"]
        summary = await call_ok(client, "merge_and_ingest", {"run_id": first["run_id"], "failures": []})
        assert summary["packets_failed"] == 0
        quota = await call_ok(client, "quota_status", {})
        assert quota["learned"]["last_429_at"] == "2026-11-30T12:00:00Z"
        assert quota["learned"]["cooldown_until"] is None  # the host's retries already waited
        assert quota["learned"]["max_safe_concurrency"] == 3 and quota["schedule"]["wave_size"] <= 3


@pytest.mark.anyio
async def test_throttling_below_a_configured_input_limit_lowers_it_to_what_the_runs_drew(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    # The config says 90,000 input tokens a minute, but four runs charged 60,000 tokens over 600 s each (24,000 a
    # minute together; several times their packets, each call re-sending the context, so they draw evenly) saw a
    # sixth of their calls refused: the key gets about 24,000, whatever the config says. (Within a quarter of
    # the configured value, what one audit's runs show is believed: ``scheduling.claims``.)
    (repo / ".audit-mcp.toml").write_text(
        REVIEW_ONLY
        + 'lenses = ["security", "correctness"]\nmax_packet_tokens = 4000\n'
        + ROOMY.replace("input_tokens_per_minute = 2000000", "input_tokens_per_minute = 90000")
    )
    host = {"host_can_dispatch_subagents": True, "host_max_active_subagents": 4, "host_model": "claude-sonnet-4-6"}
    async with Client(build_server(repo, clock=FakeClock())) as client:
        await call_ok(client, "next_step", {"root": str(repo)})
        step = await call_ok(client, "next_step", host)
        plan = await _plan(client, step["run_id"])
        assert plan["wave_size"] == 4 and len(plan["packets"]) >= 6
        for packet in plan["packets"][:4]:  # the first wave
            usage = {"input_tokens": 60_000, "api_calls": 12, "seconds": 600, "rate_limited_calls": 2}
            args = {"run_id": plan["run_id"], "packet_id": packet["packet_id"], "results": reviewer.results(packet)}
            assert (await call_ok(client, "submit_packet", {**args, "usage": usage}))["accepted"]
        status = await call_ok(client, "plan_status", {"run_id": plan["run_id"]})
        # One correction for one cause: the lower limit narrows the rest of the run (400 tokens/s over a 240 s
        # run refill 96,000, and a run of the ~8,700-token packets draws about 55,000: two); no cooldown.
        assert status["width"] == 2 and status["cooldown_until"] is None
        assert status["forecast"]["paced_by"] == "input_tokens_per_minute"
        assert "the throttled runs showed (24,000" in status["forecast"]["pace"]
        quota = await call_ok(client, "quota_status", {})
        itpm = quota["limits"]["input_tokens_per_minute"]
        assert itpm["value"] == 24_000 and itpm["confidence"] == "medium"
        assert itpm["source"].startswith("inferred from throttled runs")
        assert quota["learned"]["learned_cap"] is None  # the learned cap is not also cut
        # The configured limits that throttling did not contradict stay as configured.
        assert quota["limits"]["output_tokens_per_minute"]["value"] == 400_000


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["rolling", "whole_wave"])
async def test_throttling_at_two_slots_narrows_to_one_and_a_half_not_one(
    repo: Path, reviewer: ScriptedReviewer, mode: str
) -> None:
    # Retries the host absorbed take a quarter off, unrounded: two slots throttled become 1.5 runs at once on
    # average, kept in two slots whose starts are spaced (rolling) or in waves of two and one (whole waves).
    roomy_but_input = "[model]\nrequests_per_minute = 4000\noutput_tokens_per_minute = 400000\n"
    (repo / ".audit-mcp.toml").write_text(
        REVIEW_ONLY
        + 'lenses = ["security", "correctness"]\nmax_packet_tokens = 4000\ncarry_forward = false\n'
        + roomy_but_input
    )
    host = {"host_can_dispatch_subagents": True, "host_max_active_subagents": 2, "host_dispatch_mode": mode}
    async with Client(build_server(repo, clock=FakeClock())) as client:
        await call_ok(client, "next_step", {"root": str(repo)})
        first = await _plan(client, (await call_ok(client, "next_step", host))["run_id"])
        assert first["wave_size"] == 2 and first["schedule"]["capacity"] == 2
        for packet in first["packets"]:
            usage = {"input_tokens": 20_000, "api_calls": 12, "seconds": 600, "rate_limited_calls": 2}
            args = {"run_id": first["run_id"], "packet_id": packet["packet_id"], "usage": usage}
            receipt = await call_ok(client, "submit_packet", {**args, "results": reviewer.results(packet)})
            assert receipt["accepted"], receipt["errors"]
        await call_ok(client, "merge_and_ingest", {"run_id": first["run_id"], "failures": []})
        assert (await call_ok(client, "next_step", {}))["step_kind"] == "present_report"
        step = await call_ok(client, "next_step", {"new_audit": True})
        plan = await _plan(client, step["run_id"])
        prompt = Path(step["prompt_path"]).read_text()
        assert plan["schedule"]["capacity"] == 1.5 and plan["wave_size"] == 2
        assert "1.50 runs at once on average" in plan["schedule"]["reasoning"]
        starts = {p["packet_id"]: p["not_before_seconds"] for p in plan["packets"]}
        if mode == "rolling":
            # Two slots, the second used half the time: after the first start, one about every run length / 1.5.
            order = plan["launch_order"]
            assert [starts[pid] for pid in order] == sorted(starts[pid] for pid in order)
            assert starts[order[0]] == 0 and starts[order[-1]] > 0
            assert "Keep 2 subagent(s) running" in prompt
            for pid, at in starts.items():  # every start time the plan sets is the one the prompt gives
                assert (f"`{pid}`: **start at +{at:g}s**" in prompt) is (at > 0)
        else:
            waves = step["waves"]
            # As few waves as 1.5 at once allows, of two and one, the twos spread out among the ones.
            assert set(waves) == {1, 2} and len(waves) == math.ceil(sum(waves) / 1.5)
            assert (2, 2) not in set(itertools.pairwise(waves))
            for number, size in enumerate(waves, 1):
                assert f"**Wave {number}** ({size} subagent(s)" in prompt


@pytest.mark.anyio
async def test_a_trickle_of_retries_reported_in_usage_does_not_narrow_the_wave(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    (repo / ".audit-mcp.toml").write_text('lenses = ["security", "correctness"]\nmax_packet_tokens = 4000\n' + ROOMY)
    async with Client(build_server(repo, clock=FakeClock())) as client:
        await call_ok(client, "next_step", {"root": str(repo)})
        step = await call_ok(client, "next_step", {"host_can_dispatch_subagents": True, "host_max_active_subagents": 4})
        plan = await _plan(client, step["run_id"])
        for packet in plan["packets"]:  # one refused call in fifty: a busy shared key, not this run's pace
            usage = {"input_tokens": 20_000, "api_calls": 50, "seconds": 200, "rate_limited_calls": 1}
            args = {"run_id": plan["run_id"], "packet_id": packet["packet_id"], "results": reviewer.results(packet)}
            assert (await call_ok(client, "submit_packet", {**args, "usage": usage}))["accepted"]
        await call_ok(client, "merge_and_ingest", {"run_id": plan["run_id"], "failures": []})
        quota = await call_ok(client, "quota_status", {})
        assert quota["learned"]["last_429_at"] is not None and quota["learned"]["max_safe_concurrency"] == 4


@pytest.mark.anyio
async def test_with_nothing_known_the_first_wave_starts_narrow_and_clean_waves_widen_it_quickly(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    (repo / ".audit-mcp.toml").write_text(
        REVIEW_ONLY + 'lenses = ["security", "correctness"]\nmax_packet_tokens = 4000\n'
    )
    async with Client(build_server(repo, clock=FakeClock())) as client:
        await call_ok(client, "next_step", {"root": str(repo)})
        step = await call_ok(
            client, "next_step", {"host_can_dispatch_subagents": True, "host_max_active_subagents": 16}
        )
        plan = await _plan(client, step["run_id"])
        assert (
            plan["wave_size"] == 2 and plan["schedule"]["slow_start"] and step["forecast"]["paced_by"] == "slow_start"
        )
        assert "slow start" in Path(step["prompt_path"]).read_text()
        widths = []
        for packet in plan["packets"][:6]:  # clean packets, each reported as it finishes
            usage = {"input_tokens": 8_000, "api_calls": 12, "seconds": 200, "rate_limited_calls": 0}
            args = {"run_id": plan["run_id"], "packet_id": packet["packet_id"], "results": reviewer.results(packet)}
            assert (await call_ok(client, "submit_packet", {**args, "usage": usage}))["accepted"]
            widths.append((await call_ok(client, "plan_status", {"run_id": plan["run_id"]}))["width"])
        assert widths == sorted(widths) and widths[-1] >= 2 * widths[0] >= 4


def test_a_negative_rate_limited_calls_count_is_refused_and_nothing_is_stored(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service = AuditService(repo, clock=lambda: START)
    service.next_step({"root": str(repo)})
    step = service.next_step({"can_dispatch_subagents": True, "max_active_subagents": 4})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    packet = plan["packets"][0]
    results = reviewer.results(packet)
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results, usage={"rate_limited_calls": -1})
    assert not receipt.accepted
    assert [(e.location, e.message) for e in receipt.errors] == [
        ("/usage/rate_limited_calls", "'rate_limited_calls' must be a finite number from 0 to 100000, as counted")
    ]
    fixed = service.submit_packet(plan["run_id"], packet["packet_id"], results, usage={"rate_limited_calls": 1})
    assert fixed.accepted, fixed.errors


def test_a_spend_cap_blocks_with_the_reason_instead_of_cooling_down(repo: Path) -> None:
    service = AuditService(repo, clock=lambda: START)
    step = service.next_step({"can_dispatch_subagents": True})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    service.merge_and_ingest(
        plan["run_id"],
        [
            {"packet_id": p["packet_id"], "error": '429 {"error": {"message": "enforced_spend_limit_reached"}}'}
            for p in plan["packets"]
        ],
    )
    blocked = service.next_step()
    assert blocked.step_kind == "blocked" and "spend cap" in blocked.reason
    assert service.quota().learned["hard_stop"] is not None


def test_limits_set_in_config_shape_the_waves_and_flag_packets_that_cannot_fit(repo: Path) -> None:
    (repo / ".audit-mcp.toml").write_text(
        "max_packet_tokens = 60000\n[model]\nrequests_per_minute = 4000\n"
        "input_tokens_per_minute = 40000\noutput_tokens_per_minute = 400000\n"
    )
    service = AuditService(repo, clock=lambda: START)
    quota = service.quota(host_model="claude-haiku-4-5")
    assert quota.limits["input_tokens_per_minute"].confidence == "medium"
    assert quota.packet_budget_tokens == 32_000  # packed to fit a first call into the input bucket
    step = service.next_step({"can_dispatch_subagents": True, "max_active_subagents": 16, "model": "claude-haiku-4-5"})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    assert plan["wave_size"] <= 3 and "input_tokens_per_minute" in plan["schedule"]["reasoning"]
    assert max(p["estimated_tokens"] for p in plan["packets"]) <= 32_000
    assert plan["schedule"]["oversize_packets"] == []


def _models_api(request: httpx.Request) -> httpx.Response:
    assert request.headers["x-api-key"] == "sk-test"
    return httpx.Response(
        200,
        json={"id": "claude-sonnet-4-6", "max_input_tokens": 1_000_000, "max_tokens": 64_000},
        headers={"anthropic-ratelimit-requests-limit": "1000", "anthropic-ratelimit-input-tokens-limit": "450000"},
    )


def test_the_provider_probe_reads_context_and_rate_limit_headers() -> None:
    transport = httpx.MockTransport(_models_api)
    found = probe(
        "anthropic", "claude-sonnet-4-6", "auto", START, env={"ANTHROPIC_API_KEY": "sk-test"}, transport=transport
    )
    assert found.limits["input_tokens_per_minute"].confidence == "high"
    assert found.limits["requests_per_minute"].value == 1000
    assert found.limits["context_tokens"].value == 1_000_000 and found.limits["output_tokens"].confidence == "medium"
    assert probe("anthropic", "claude-sonnet-4-6", "auto", START, env={}, transport=transport).limits == {}
    assert probe("anthropic", "claude-sonnet-4-6", "never", START, env={"ANTHROPIC_API_KEY": "k"}).limits == {}


def test_quota_uses_the_probe_when_asked(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDIT_MCP_PROBE", "force")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    service = AuditService(repo, clock=lambda: START)
    service.probe_transport = httpx.MockTransport(_models_api)
    quota = service.quota("claude-sonnet-4-6")
    assert quota.limits["input_tokens_per_minute"].value == 450_000
    assert quota.limits["input_tokens_per_minute"].confidence == "high"


def test_the_quota_verb_shows_limits_learned_state_schedule_and_forecast(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUDIT_MCP_ITPM", "450000")
    monkeypatch.setenv("AUDIT_MCP_HALF_LIFE_HOURS", "6")
    root = str(repo)
    # Before the host says whether it can dispatch: the work is all still to come, and quota forecasts it.
    assert (
        main(
            [
                "next-step",
                "--root",
                root,
                "--host-max-active-subagents",
                "6",
                "--host-model",
                "claude-sonnet-4-6",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["quota", "--root", root]) == 0
    quota = json.loads(capsys.readouterr().out)
    assert quota["limits"]["input_tokens_per_minute"] == {
        "value": 450_000,
        "source": "environment AUDIT_MCP_ITPM",
        "confidence": "medium",
    }
    assert quota["learned"]["half_life_hours"] == 6 and quota["learned"]["last_429_at"] is None
    assert quota["learned"]["max_safe_concurrency"] == quota["learned"]["physical_cap"] <= 6
    assert quota["learned_state_path"].endswith("learned.sqlite3")
    assert 0 < quota["schedule"]["wave_size"] <= 6 and quota["schedule"]["reasoning"].startswith("wave size")
    assert quota["forecast"]["packets"] == quota["schedule"]["packets"] > 0
    assert quota["forecast"]["seconds_low"] < quota["forecast"]["seconds_high"]


def test_a_bad_scheduler_setting_is_reported_not_crashed_on(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDIT_MCP_WAVE_KIND", "sideways")
    step = AuditService(repo).next_step({"can_dispatch_subagents": True})
    assert step.step_kind == "blocked" and "AUDIT_MCP_WAVE_KIND" in step.reason


@pytest.mark.parametrize(
    ("answer", "host", "scheduler", "client", "kind"),
    [
        (None, None, None, None, "rolling"),
        (None, None, None, "Cursor", "whole_wave"),
        (None, None, None, "claude-code", "rolling"),
        (None, None, "rolling", "cursor", "rolling"),
        (None, "whole_wave", "rolling", None, "whole_wave"),
        ("rolling", "whole_wave", None, "cursor", "rolling"),
    ],
    ids=[
        "default",
        "cursor-waits-for-whole-waves",
        "claude-code-rolls",
        "scheduler-config-wins-over-client",
        "host-config-wins-over-scheduler-config",
        "the-host-s-answer-wins",
    ],
)
def test_the_dispatch_mode_comes_from_the_host_then_config_then_the_client(
    answer: str | None, host: str | None, scheduler: str | None, client: str | None, kind: str
) -> None:
    caps = hosts.resolve({"dispatch_mode": answer}, {}, HostConfig(dispatch_mode=host), client, scheduler)  # type: ignore[arg-type]
    assert caps.dispatch_mode == kind


def test_the_environment_sets_the_dispatch_mode_over_the_config_file(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / ".audit-mcp.toml").write_text('[host]\ndispatch_mode = "rolling"\n')
    monkeypatch.setenv("AUDIT_MCP_DISPATCH_MODE", "whole_wave")
    step = AuditService(repo, clock=lambda: START).next_step({"can_dispatch_subagents": True})
    assert step.host.dispatch_mode == "whole_wave" and step.dispatch_mode == "whole_wave"
    assert step.host.sources["dispatch_mode"] == "session config [host]"


@pytest.mark.parametrize(
    ("model", "warned"),
    [
        ("", False),
        ("[model]\noutput_tokens = 64000\noutput_tokens_per_minute = 8000\n", True),
    ],
    ids=["guessed-limits-warn-of-nothing", "max-tokens-above-the-output-bucket"],
)
def test_packets_that_can_never_be_admitted_are_flagged_only_when_limits_are_known(
    repo: Path, model: str, warned: bool
) -> None:
    (repo / ".audit-mcp.toml").write_text(model)
    step = first_review(
        AuditService(repo, clock=lambda: START), {"can_dispatch_subagents": True, "model": "claude-haiku-4-5"}
    )
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    flagged = plan["schedule"]["oversize_packets"]
    assert flagged == ([p["packet_id"] for p in plan["packets"]] if warned else [])
    assert ("Warning: packet(s)" in Path(step.prompt_path).read_text()) is warned


def test_a_binding_configured_limit_paces_the_launches_in_the_plan_and_the_prompt(repo: Path) -> None:
    (repo / ".audit-mcp.toml").write_text("[model]\ninput_tokens_per_minute = 120000\n")
    step = first_review(
        AuditService(repo, clock=lambda: START), {"can_dispatch_subagents": True, "max_active_subagents": 16}
    )
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    offsets = plan["schedule"]["launch_offsets"]
    assert len(plan["packets"]) > 1 and plan["schedule"]["launch_interval_seconds"] > 0
    assert offsets and set(offsets) <= {p["packet_id"] for p in plan["packets"]}
    assert plan["launch_order"][0] not in offsets  # the first packet always starts at once
    by_id = {p["packet_id"]: p for p in plan["packets"]}
    assert {pid: by_id[pid]["not_before_seconds"] for pid in offsets} == pytest.approx(offsets, abs=0.05)
    # The Step carries the pacing, and its prompt tells the host to hold each paced packet back.
    assert step.launch_offsets == pytest.approx(offsets, abs=0.05)
    assert step.launch_interval_seconds == plan["schedule"]["launch_interval_seconds"]
    prompt = Path(step.prompt_path).read_text()
    assert "about every" in prompt and "must not start sooner than N seconds" in prompt
    last = plan["launch_order"][-1]
    assert f"`{last}`: **start at +{by_id[last]['not_before_seconds']:g}s**" in prompt
    assert "Launch every packet of the wave at once" not in prompt


def test_a_whole_wave_host_is_paced_by_whole_waves(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDIT_MCP_WAVE_KIND", "whole_wave")
    (repo / ".audit-mcp.toml").write_text("[model]\ninput_tokens_per_minute = 120000\n")
    step = first_review(
        AuditService(repo, clock=lambda: START), {"can_dispatch_subagents": True, "max_active_subagents": 16}
    )
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    assert plan["schedule"]["wave_kind"] == "whole_wave" and len(step.waves) > 1
    starts = [p["not_before_seconds"] for p in plan["packets"]]
    # Every packet of a wave shares one earliest start, and later waves start later.
    by_wave, at = [], 0
    for size in step.waves:
        by_wave.append(starts[at : at + size])
        at += size
    assert all(len(set(wave)) == 1 for wave in by_wave)
    assert [w[0] for w in by_wave] == sorted(w[0] for w in by_wave) and by_wave[-1][0] > 0
    prompt = Path(step.prompt_path).read_text()
    assert "Launch all the packets of the wave together" in prompt
    assert "A wave whose packets are marked **start at +Ns**" in prompt


def test_a_resumed_run_counts_its_launch_offsets_from_its_first_outstanding_packet(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    (repo / ".audit-mcp.toml").write_text("[model]\ninput_tokens_per_minute = 120000\n")
    service = AuditService(repo, clock=lambda: START)
    step = first_review(service, {"can_dispatch_subagents": True, "max_active_subagents": 16})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    first, second = plan["packets"][0], plan["packets"][1]
    assert service.submit_packet(plan["run_id"], first["packet_id"], reviewer.results(first)).accepted
    resumed = service.next_step()
    assert resumed.run_id == plan["run_id"] and resumed.packets_outstanding == len(plan["packets"]) - 1
    shift = second["not_before_seconds"]
    expected = {
        p["packet_id"]: round(p["not_before_seconds"] - shift, 1)
        for p in plan["packets"][1:]
        if p["not_before_seconds"] - shift > 0
    }
    assert (resumed.launch_offsets or {}) == pytest.approx(expected, abs=0.05)
    assert second["packet_id"] not in (resumed.launch_offsets or {})


def _dispatched(repo: Path, config: str, model: str) -> tuple[int, dict[str, Any]]:
    (repo / ".audit-mcp.toml").write_text(config)
    service = AuditService(repo, clock=lambda: START)
    step = first_review(service, {"can_dispatch_subagents": True, "max_active_subagents": 16, "model": model})
    return service.quota(host_model=model).packet_budget_tokens, json.loads(
        Path(step.artifact_paths["plan"]).read_text()
    )


def test_a_low_input_limit_packs_smaller_packets_so_one_run_does_not_outrun_it(repo: Path, tmp_path: Path) -> None:
    unlimited = tmp_path / "unlimited"
    shutil.copytree(repo, unlimited)
    budget, plan = _dispatched(repo, "[model]\ninput_tokens_per_minute = 30000\n", "gpt-5")
    # Uncached (every input token charged on every call): 500 tokens/s × 240 s × 0.85 / 8.
    assert budget == 12_750
    assert "packets are kept to ~12,750 tokens" in plan["schedule"]["reasoning"]
    default_budget, default_plan = _dispatched(unlimited, "", "gpt-5")
    assert default_budget == 60_000 and "packets are kept" not in default_plan["schedule"]["reasoning"]
    assert len(plan["packets"]) > len(default_plan["packets"])
    assert max(p["estimated_tokens"] for p in plan["packets"]) < max(
        p["estimated_tokens"] for p in default_plan["packets"]
    )


def test_a_cached_provider_under_the_same_limit_keeps_larger_packets(repo: Path) -> None:
    budget, plan = _dispatched(repo, "[model]\ninput_tokens_per_minute = 30000\n", "claude-haiku-4-5")
    assert budget == 24_000  # the first-call bound: cache reads leave one run well inside the bucket
    assert "packets are kept" not in plan["schedule"]["reasoning"]


def test_an_uncached_provider_packs_small_where_input_binds_and_large_where_slots_do(
    repo: Path, tmp_path: Path
) -> None:
    slots = tmp_path / "slots"
    shutil.copytree(repo, slots)
    budget, plan = _dispatched(repo, "[model]\ninput_tokens_per_minute = 450000\n", "gpt-5")
    assert budget == 20_000  # one run fits, but each call re-sends the context: small packets cost less input
    roomy, roomy_plan = _dispatched(slots, "[model]\ninput_tokens_per_minute = 4000000\n", "gpt-5")
    assert roomy == 60_000 and "every call re-sends" not in roomy_plan["schedule"]["reasoning"]
    assert "packets are kept to ~20,000 tokens: every call re-sends the whole context" in plan["schedule"]["reasoning"]
    assert max(p["estimated_tokens"] for p in plan["packets"]) <= 20_000


def _listed(prompt: str, packet_ids: list[str]) -> list[str]:
    """The packet ids in the order the prompt lists them."""
    return sorted(packet_ids, key=lambda pid: prompt.index(f"- `{pid}`:"))


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["rolling", "whole_wave"])
async def test_each_host_kind_is_told_to_dispatch_the_way_its_plan_was_made(repo: Path, mode: str) -> None:
    # A binding input limit paces the launches, so the prompt carries start times too.
    (repo / ".audit-mcp.toml").write_text(
        REVIEW_ONLY
        + 'lenses = ["security", "correctness"]\nmax_packet_tokens = 4000\n[model]\ninput_tokens_per_minute = 40000\n'
    )
    async with Client(build_server(repo, clock=FakeClock())) as client:
        await call_ok(client, "next_step", {"root": str(repo)})
        step = await call_ok(
            client,
            "next_step",
            {
                "host_can_dispatch_subagents": True,
                "host_max_active_subagents": 4,
                "host_dispatch_mode": mode,
                "host_model": "claude-sonnet-4-6",
            },
        )
        plan = await _plan(client, step["run_id"])
        prompt = Path(step["prompt_path"]).read_text()
        width, order = plan["wave_size"], plan["launch_order"]
        assert plan["schedule"]["dispatch_mode"] == step["dispatch_mode"] == mode
        assert len(order) > width > 1 and sum(step["waves"]) == len(order)
        assert _listed(prompt, order) == order  # in the plan's launch order
        starts = {p["packet_id"]: p["not_before_seconds"] for p in plan["packets"]}
        assert any(starts.values())
        for pid, at in starts.items():  # every start time the plan sets is the one the prompt gives
            assert (f"`{pid}`: **start at +{at:g}s**" in prompt) is (at > 0)
        assert f"call `plan_status` with `run_id` = `{plan['run_id']}`" in prompt
        assert f"plan-status --root {repo}" in prompt
        status = await call_ok(client, "plan_status", {"run_id": plan["run_id"], "launched": order[:width]})
        assert status["dispatch_mode"] == mode and status["width"] == width
        if mode == "rolling":
            # Full slots refilled as they free: the waves are not balanced, and nobody waits for a wave.
            assert step["waves"][:-1] == [width] * (len(step["waves"]) - 1)
            assert f"Keep {width} subagent(s) running: as soon as one finishes" in prompt
            assert f"**Launch order** (keep {width} running" in prompt and "**Wave" not in prompt
            assert "Wait until every subagent of the wave has finished" not in prompt
            assert "Each time a subagent finishes, before you start the next packet, call `plan_status`" in prompt
            assert f"Keep {width} subagent(s) running (0 slot(s) free now)" in status["next_action"]
        else:
            assert max(step["waves"]) - min(step["waves"]) <= 1  # balanced: a wave waits for its slowest member
            at = 0
            for number, size in enumerate(step["waves"], 1):
                wave = order[at : at + size]
                at += size
                assert len({starts[pid] for pid in wave}) == 1  # a wave goes out together
                block = prompt.split(f"**Wave {number}** ({size} subagent(s)")[1].split("**Wave")[0]
                assert _listed(block, wave) == wave
            assert "Wait until every subagent of the wave has finished before you start the next wave" in prompt
            assert "Between waves, before you launch the next one, call `plan_status`" in prompt
            assert "Keep " not in prompt and "**Launch order**" not in prompt
            assert f"launch the next {status['waves'][0]} waiting packet(s) together" in status["next_action"]


def test_packets_a_quoted_limit_cannot_admit_are_held_back_and_requeued_without_an_attempt(repo: Path) -> None:
    (repo / ".audit-mcp.toml").write_text(
        REVIEW_ONLY
        + 'lenses = ["security", "correctness"]\nmax_packet_tokens = 30000\n'
        + ROOMY.replace("input_tokens_per_minute = 2000000", "input_tokens_per_minute = 40000")
    )
    service = AuditService(repo, clock=lambda: START)
    step = service.next_step({"can_dispatch_subagents": True, "max_active_subagents": 2, "model": "claude-sonnet-4-6"})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    first = plan["packets"][0]
    # The first subagent's 429 quotes an input limit below the configured one (within the quarter one audit's
    # word may lower it by): the packets still waiting whose first call cannot fit it are not to be launched.
    quoted = {
        "packet_id": first["packet_id"],
        "error": "API Error: 429 This request would exceed the rate limit for your organization of 10,000 input "
        "tokens per minute. retry-after: 30",
    }
    status = service.plan_status(plan["run_id"], [quoted], [first["packet_id"]])
    assert status.held and first["packet_id"] not in status.held and "Do not launch" in status.next_action
    held = next(p for p in plan["packets"] if p["packet_id"] == status.held[0])
    service.merge_and_ingest(plan["run_id"], [quoted])
    # Held work goes back to the queue as it was: never tried, so no attempt counted against it.
    never_tried = service.explain_task(held["tasks"][0]["task_id"])
    assert never_tried.state == "pending" and never_tried.attempts == 0
    tried = service.explain_task(first["tasks"][0]["task_id"])
    assert tried.state == "pending" and tried.attempts == 1


def _two_hundred_packets(tmp_path: Path) -> Path:
    """A committed repository of 230 small modules whose first run is 200 packets of one file each."""
    root = tmp_path / "many"
    root.mkdir()
    for n in range(230):
        body = "".join(f"def f{n}_{k}(value):\n    return value * {k} + {n}\n\n\n" for k in range(24))
        (root / f"m{n:03d}.py").write_text(f'"""Module {n}."""\n\n\n{body}')
    (root / ".audit-mcp.toml").write_text(REVIEW_ONLY + 'lenses = ["security"]\nmax_packet_tokens = 4000\n' + ROOMY)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "many")
    return root


async def _launch_list(client: Client, run_id: str, wave: int) -> list[str]:
    """The packets of one of the plan's launch lists (its wave ``wave``)."""
    read = await client.read_resource(f"audit://runs/{run_id}/dispatch-plan/waves/{wave}")
    return [p["packet_id"] for p in json.loads(read.contents[0].text)["packets"]]  # type: ignore[union-attr]


def _named_wave(prompt: str, run_id: str, after: str = "are not listed here") -> int:
    """The launch list a step names for the waves (or the part of its queue) it does not list."""
    rest = prompt.split(after, 1)[1]
    return int(rest.split(f"audit://runs/{run_id}/dispatch-plan/waves/", 1)[1].split("`", 1)[0])


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["whole_wave", "rolling"])
async def test_the_packets_a_step_does_not_list_are_found_from_the_packet_and_launch_list_it_names(
    tmp_path: Path, reviewer: ScriptedReviewer, mode: str
) -> None:
    # A run of 200 packets two at a time lists its first packets in the step and names where the rest are.
    # At dispatch a whole-wave host's waves are the plan's, named by number; once packets are submitted the
    # outstanding waves are cut anew, and the step names the packet to go on from and the launch list
    # holding it, not a wave number that names other packets. A rolling host's queue names both each time.
    root = _two_hundred_packets(tmp_path)
    host = {"host_can_dispatch_subagents": True, "host_max_active_subagents": 2, "host_dispatch_mode": mode}
    marker = "are not listed here" if mode == "whole_wave" else "more packet(s), not listed here"
    async with Client(build_server(root, clock=FakeClock())) as client:
        step = await call_ok(client, "next_step", host)
        run_id = step["run_id"]
        page = await _plan(client, run_id)
        assert page["page"]["packets_total"] == 200 and sum(step["waves"]) == 200
        for moment in ("dispatch", "resumed"):
            prompt = Path(step["prompt_path"]).read_text()
            listed = [line.split("`")[1] for line in prompt.splitlines() if line.startswith("- `")]
            assert 0 < len(listed) < len(step["packet_ids"]) and marker in prompt
            following = step["packet_ids"][len(listed)]
            holding = await _launch_list(client, run_id, _named_wave(prompt, run_id, marker))
            if mode == "rolling":
                assert f"from packet `{following}` on" in prompt and following in holding
            elif moment == "dispatch":
                assert holding[0] == following  # the plan's own wave, by its number
            else:
                assert f"Go on in launch order from packet `{following}`, 2 at a time" in prompt
                assert following in holding
            if moment == "dispatch":  # then the first three packets are submitted, and the host asks again
                for packet in page["packets"][:3]:
                    args = {"run_id": run_id, "packet_id": packet["packet_id"], "results": reviewer.results(packet)}
                    assert (await call_ok(client, "submit_packet", args))["accepted"]
                step = await call_ok(client, "next_step", host)
                assert step["run_id"] == run_id and len(step["packet_ids"]) == 197
