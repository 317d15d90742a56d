"""Forecasts are the plan: status, quota and the Step forecast the next run with the code that dispatches it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.driving import cli
from tests.sdist_shape import write_sdist


def _same_run(forecast: dict[str, Any], plan: dict[str, Any]) -> None:
    expected = plan["schedule"]["forecast"]
    for key in ("packets", "waves", "estimated_input_tokens", "estimated_output_tokens", "time_range"):
        assert forecast[key] == expected[key], key
    assert forecast["wave_sizes"] == plan["waves"]
    assert forecast["wave_size"] == plan["wave_size"]
    assert forecast["estimated_tokens"] == plan["estimated_total_tokens"]
    assert forecast["cells"] == sum(len(p["tasks"]) for p in plan["packets"])


def test_the_forecast_before_dispatch_is_the_plan_dispatched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(write_sdist(tmp_path / "click-8.1.7"))
    # Packets small enough that the run needs several waves, as on the real sdist.
    # The review run (the context run before it is forecast the same way, one packet).
    Path(root, ".audit-mcp.toml").write_text("max_packet_tokens = 6000\ncontext_pass = false\n")
    code, check = cli(capsys, "next-step", "--root", root)
    assert code == 0 and check["step_kind"] == "capability_check"
    code, status = cli(capsys, "status", "--root", root, "--json")
    code, quota = cli(capsys, "quota", "--root", root)
    code, step = cli(capsys, "next-step", "--root", root, "--host-can-dispatch-subagents", "true")
    assert step["step_kind"] == "dispatch_review", step
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    assert len(plan["waves"]) > 1
    _same_run(check["forecast"], plan)
    _same_run(quota["forecast"], plan)
    assert status["forecast"]["next_run_packets"] == len(plan["packets"])
    assert status["forecast"]["next_run_waves"] == plan["waves"]
    assert status["forecast"]["estimated_input_tokens"] == plan["schedule"]["forecast"]["estimated_input_tokens"]
    assert status["forecast"]["estimated_tokens"] == plan["estimated_total_tokens"]
    # The run's forecast, and with the first dispatch the whole audit's beside it.
    assert {k: v for k, v in step["forecast"].items() if k != "audit"} == plan["schedule"]["forecast"]
    assert step["forecast"]["audit"]["obligations"]["review"]["in_open_run"] == len(plan["packets"])
    prompt = Path(check["prompt_path"]).read_text()
    # The prompt states the run in the host's own terms: a queue kept N wide, or waves.
    if plan["schedule"]["dispatch_mode"] == "rolling":
        assert f"{len(plan['packets'])} packet(s), at most {plan['wave_size']} at a time" in prompt
    else:
        assert f"{len(plan['packets'])} packet(s) in {len(plan['waves'])} wave(s)" in prompt


def test_no_packet_id_is_shown_before_its_run_exists(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(repo)
    (repo / ".audit-mcp.toml").write_text("context_pass = false\n")  # one run holds every pending cell
    cli(capsys, "next-step", "--root", root)
    _code, before = cli(capsys, "quota", "--root", root)
    text = json.dumps(before)
    assert not re.search(r'"(?:A\d+-R\d+-)?P\d\d"', text), "a forecast named packets that do not exist"
    assert before["schedule"]["launch_order"] == []
    _code, step = cli(capsys, "next-step", "--root", root, "--host-can-dispatch-subagents", "true")
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    _code, during = cli(capsys, "quota", "--root", root)
    # Now a run is open: the ids shown are its own, in its launch order, and nothing is left to forecast.
    assert during["schedule"]["launch_order"] == plan["launch_order"]
    assert during["forecast"]["packets"] == 0
    _code, status = cli(capsys, "status", "--root", root, "--json")
    assert status["forecast"]["pending_cells"] == 0 and status["forecast"]["next_run_packets"] == 0
    assert status["forecast"]["open_run_packets_outstanding"] == len(plan["packets"])
