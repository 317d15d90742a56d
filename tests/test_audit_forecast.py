"""The whole audit forecast before its first dispatch: quota (even before any audit), the first step, status and
the report, with a cost only where prices are configured, and beside it in the report what the runs used."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from audit_mcp.surfaces.cli import main
from audit_mcp.surfaces.server import build_server
from audit_mcp.usecases.service import AuditService
from tests.driving import call_ok, cli, finish
from tests.test_headless import headless

MODEL = "claude-sonnet-4-6"
PRICES = (
    '[prices]\ncurrency = "EUR"\n[prices."claude-sonnet"]\ninput = 3.0\noutput = 15.0\ncache_read = 0.3\n'
    "cache_write = 3.75\n"
)


def _shape(forecast: dict[str, Any]) -> dict[str, Any]:
    """What two forecasts of the same audit must agree on."""
    return {
        "packets": forecast["packets"],
        "runs": forecast["runs"],
        "tokens": forecast["tokens"],
        "time": (forecast["seconds_low"], forecast["seconds_high"]),
        "by_obligation": {k: (o["packets"], o["runs"], o["estimated"]) for k, o in forecast["obligations"].items()},
    }


def test_quota_before_any_audit_forecasts_what_the_first_step_then_forecasts_and_writes_nothing(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    before = sorted(p.name for p in repo.iterdir())
    code, quota = cli(capsys, "quota", "--root", root)
    assert code == 0
    assert sorted(p.name for p in repo.iterdir()) == before, "a forecast before any audit writes nothing"
    whole = quota["forecast"]["audit"]
    assert "nothing was written" in whole["scope"] and whole["packets"] > 0
    assert any("No audit has started here" in note and "next-step" in note for note in quota["notes"])
    code, step = cli(capsys, "next-step", "--root", root)
    assert code == 0 and step["step_kind"] == "capability_check"
    first = step["forecast"]["audit"]
    assert _shape(first) == _shape(whole)
    # By obligation: the threat model's one packet, the review of every cell, and verification, an estimate.
    _code, status = cli(capsys, "status", "--root", root, "--json")
    by = first["obligations"]
    assert (by["context"]["packets"], by["context"]["runs"]) == (1, 1)
    assert by["review"]["cells"] == status["obligations"]["review"]["cells"]["total"] > 0
    assert by["verification"]["estimated"] is True and "prior" in by["verification"]["how"]
    assert first["packets"] == sum(o["packets"] for o in by.values())
    tokens = first["tokens"]
    assert tokens["input_without_caching"] == tokens["input_with_caching"] + tokens["cache_reads_with_caching"]
    assert tokens["input_with_caching"] < tokens["input_without_caching"]
    assert first["seconds_low"] < first["seconds_high"] and first["host_width"] >= 1
    assert status["forecast"]["audit"]["packets"] == first["packets"]
    prompt = Path(step["prompt_path"]).read_text()
    assert "The whole audit, to tell the user before any subagent starts:" in prompt
    assert f"{first['packets']} packet(s) in {first['runs']} run(s)" in prompt


def test_the_cost_comes_only_from_configured_prices(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    _code, quota = cli(capsys, "quota", "--root", root, "--host-model", MODEL)
    cost = quota["forecast"]["audit"]["cost"]
    assert cost["without_caching"] is None and cost["with_caching"] is None
    assert f'[prices."{MODEL}"]' in cost["note"] and "per million tokens" in cost["note"]
    _code, unnamed = cli(capsys, "quota", "--root", root)
    assert "--host-model" in unnamed["forecast"]["audit"]["cost"]["note"]
    mine = tmp_path / "mine.toml"
    mine.write_text(PRICES)
    _code, quota = cli(capsys, "quota", "--root", root, "--config", str(mine), "--host-model", MODEL)
    whole = quota["forecast"]["audit"]
    tokens, cost = whole["tokens"], whole["cost"]
    assert cost["currency"] == "EUR" and cost["prices"]["from"] == '[prices."claude-sonnet"]'
    assert cost["without_caching"] == round((tokens["input_without_caching"] * 3 + tokens["output"] * 15) / 1e6, 2)
    with_caching = tokens["input_with_caching"] * 3.75 + tokens["cache_reads_with_caching"] * 0.3
    assert cost["with_caching"] == round((with_caching + tokens["output"] * 15) / 1e6, 2)
    assert 0 < cost["with_caching"] < cost["without_caching"]
    # Without cache_read there is no cost with caching, and the note says what to add.
    cheap = tmp_path / "cheap.toml"
    cheap.write_text("[prices]\ninput = 1.0\noutput = 2.0\n")
    _code, quota = cli(capsys, "quota", "--root", root, "--config", str(cheap), "--host-model", "some-model")
    cost = quota["forecast"]["audit"]["cost"]
    assert cost["currency"] == "USD" and cost["without_caching"] > 0 and cost["with_caching"] is None
    assert "cache_read" in cost["note"]
    cheap.write_text("[prices]\ninptu = 1.0\n")
    assert main(["quota", "--root", root, "--config", str(cheap)]) == 1
    assert "[prices] inptu: not a price" in capsys.readouterr().err
    # The code under audit does not price its own audit: a cost is what you decide to spend on.
    (repo / ".audit-mcp.toml").write_text("[prices]\ninput = 0.0\noutput = 0.0\n")
    assert main(["quota", "--root", root, "--host-model", MODEL]) == 1
    err = capsys.readouterr().err
    assert "[prices] is refused" in err and "--config" in err


def test_a_review_bigger_than_a_run_is_an_estimate_that_bounds_what_dispatch_packs(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / ".audit-mcp.toml").write_text(
        "max_packets_per_run = 2\nmax_packet_tokens = 25000\ncontext_pass = false\nverification_pass = false\n"
    )
    root = str(repo)
    _code, step = cli(capsys, "next-step", "--root", root, "--host-can-dispatch-subagents", "true")
    review = step["forecast"]["audit"]["obligations"]["review"]
    assert review["estimated"] is True and "estimated" in review["how"] and "25,000 tokens" in review["how"]
    assert review["runs"] == math.ceil(review["packets"] / 2) and review["packets"] > 2
    assert review["in_open_run"] == 2  # the first run's two packets, as dispatched
    service = AuditService(repo)
    assert finish(service).step_kind == "present_report"
    _code, ledger = cli(capsys, "ledger", "--root", root)
    dispatched = [json.loads(line)["data"] for line in ledger.splitlines() if '"action":"dispatch"' in line]
    packed = sum(d["packets"] for d in dispatched)
    # Filling packets in queue order comes close to what the packer, seating neighbours together, makes.
    assert abs(packed - review["packets"]) <= 0.3 * review["packets"], (packed, review)
    _code, status = cli(capsys, "status", "--root", root, "--json")
    assert status["forecast"]["audit"]["packets"] == 0 and status["forecast"]["audit"]["runs"] == 0


def test_the_report_sets_what_the_runs_used_beside_the_forecast_of_the_first_dispatch(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text(PRICES)
    proc = headless(
        repo, tmp_path / "state", "--host-model", MODEL, "--config", str(mine), SCRIPTED_WORKER_PRINTS="claude"
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads((repo / ".audit-mcp" / "report" / "report.json").read_text())
    usage = report["usage"]
    workers = report["audit"]["runs"]
    assert usage["packets_merged"] == usage["packets_reporting"] >= workers
    # Each scripted worker printed Claude Code's result: 21,620 input and 4,106 output tokens.
    assert usage["usage"]["input_tokens"] == 21_620 * usage["packets_merged"]
    assert usage["usage"]["output_tokens"] == 4_106 * usage["packets_merged"]
    expected = (usage["usage"]["input_tokens"] * 3 + usage["usage"]["output_tokens"] * 15) / 1e6
    assert usage["cost"] == round(expected, 2) and usage["currency"] == "EUR"
    forecast = usage["forecast_at_first_dispatch"]
    assert forecast["scope"].startswith("audit 1, whole") and forecast["cost"]["with_caching"] > 0
    assert forecast["packets"] >= usage["packets_merged"] - forecast["obligations"]["verification"]["packets"]
    markdown = (repo / ".audit-mcp" / "report" / "report.md").read_text()
    section = markdown.split("## Forecast and usage", 1)[1].split("\n## ", 1)[0]
    assert "Forecast with the first dispatch:" in section and "EUR without prompt caching" in section
    assert f"Used, as {usage['packets_merged']} of {usage['packets_merged']} merged packet(s) reported" in section
    assert f"~{usage['cost']:,.2f} EUR at the configured prices" in section


@pytest.mark.anyio
async def test_quota_status_and_audit_status_forecast_the_whole_audit_over_mcp(repo: Path) -> None:
    async with Client(build_server(repo)) as client:
        quota = await call_ok(client, "quota_status", {})
        assert "nothing was written" in quota["forecast"]["audit"]["scope"]
        assert quota["probe"]["mode"] == "never" and quota["probe"]["asked"] is None
        assert not (repo / ".audit-mcp").exists()
        step = await call_ok(client, "next_step", {})
        status = await call_ok(client, "audit_status", {})
    assert _shape(status["forecast"]["audit"]) == _shape(step["forecast"]["audit"])
    assert _shape(step["forecast"]["audit"]) == _shape(quota["forecast"]["audit"])
