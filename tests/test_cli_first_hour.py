"""The command line as a new user meets it: looking never writes, refusals say where they looked, and
``status`` names what it skipped and why."""

from __future__ import annotations

import argparse
import json
import re
import socket
from pathlib import Path

import pytest

from audit_mcp.surfaces.cli import build_parser, exits, main
from audit_mcp.surfaces.cli.exits import EXIT_USAGE
from audit_mcp.usecases.service import AuditService
from tests.driving import cli, past_context_json


def test_status_quota_and_report_on_a_folder_never_audited_create_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "never-audited"
    folder.mkdir()
    (folder / "app.py").write_text("print('hi')\n")
    code, status = cli(capsys, "status", "--root", str(folder), "--json")
    assert code == 0 and status["audit_id"] is None
    code, quota = cli(capsys, "quota", "--root", str(folder))
    assert code == 0 and quota["forecast"]["packets"] == 0
    assert main(["report", "--root", str(folder)]) == 1
    err = capsys.readouterr().err
    assert str(folder / ".audit-mcp") in err and "next_step" in err
    assert sorted(p.name for p in folder.iterdir()) == ["app.py"], "looking must leave nothing behind"


def test_a_refusal_for_an_unknown_run_says_where_it_looked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    results = tmp_path / "results.json"
    results.write_text("[]")
    code, receipt = cli(
        capsys,
        "submit-packet",
        "--root",
        str(folder),
        "--run-id",
        "A1-R1",
        "--packet-id",
        "A1-R1-P01",
        "--results",
        str(results),
    )
    assert code == 2 and receipt["accepted"] is False
    message = receipt["errors"][0]["message"]
    assert str(folder / ".audit-mcp") in message and "--root" in message
    assert not (folder / ".audit-mcp").exists()


def test_status_lists_the_files_it_skipped_and_why(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli(capsys, "next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true")
    code, status = cli(capsys, "status", "--root", str(repo), "--json")
    assert code == 0
    skipped = {s["file"]: s["reason"] for s in status["skipped"]}
    assert skipped["vendor/left-pad.js"].startswith("vendored")
    assert skipped["app/schema_pb2.py"].startswith("generated")
    assert skipped["README.md"].startswith("documentation")
    assert status["skipped_files"] == len(status["skipped"]) == sum(status["skipped_by_reason"].values())
    code, table = cli(capsys, "status", "--root", str(repo), "--table")
    assert "Skipped at intake" in table and "vendor/left-pad.js: vendored" in table


def _parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"audit-mcp": parser, **sub.choices}


def test_every_verb_has_a_description_and_every_flag_its_help() -> None:
    for name, parser in _parsers().items():
        assert (parser.description or "").strip(), f"{name} has no description"
        for action in parser._actions:
            if action.option_strings and action.help != argparse.SUPPRESS:
                assert (action.help or "").strip(), f"{name} {action.option_strings[0]} has no help"


@pytest.mark.parametrize(
    "argv",
    [
        ["no-such-verb"],
        ["next-step", "--no-such-flag"],
        ["submit-packet", "--run-id", "R"],
        ["next-step", "--lenses", ","],
    ],
    ids=["unknown-verb", "unknown-flag", "missing-required", "bad-value"],
)
def test_usage_errors_exit_64_never_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == EXIT_USAGE == 64
    assert "usage: audit-mcp" in capsys.readouterr().err


def test_the_exit_codes_are_documented_in_the_guide_and_the_help() -> None:
    guide = (Path(__file__).resolve().parent.parent / "docs" / "command-line.md").read_text()
    table = guide.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    documented = {int(code) for code in re.findall(r"^\| `(\d+)` \|", table, re.M)}
    codes = {v for k, v in vars(exits).items() if k.startswith("EXIT_")}
    assert documented == codes
    epilog = build_parser().epilog or ""
    assert {int(code) for code in re.findall(r"^  (\d+) ", epilog, re.M)} == codes


def test_next_step_exits_4_on_a_blocked_step_and_says_how_to_go_on(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / ".audit-mcp.toml").write_text('lenses = ["nope"]\n')
    code = main(["next-step", "--root", str(repo)])
    captured = capsys.readouterr()
    assert code == exits.EXIT_BLOCKED == 4
    assert json.loads(captured.out)["step_kind"] == "blocked"
    assert "unknown lens" in captured.err and "--retry-blocked" in captured.err


def test_a_malformed_results_file_is_refused_with_a_receipt_like_any_refusal(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, step = cli(capsys, "next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true")
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    broken = repo.parent / "broken.json"
    broken.write_text('[{"task_id": "T00001", "status": ')
    packet = plan["packets"][0]["packet_id"]
    code, receipt = cli(
        capsys,
        "submit-packet",
        "--root",
        str(repo),
        "--run-id",
        plan["run_id"],
        "--packet-id",
        packet,
        "--results",
        str(broken),
    )
    assert code == exits.EXIT_REFUSED and receipt["accepted"] is False
    assert receipt["errors"][0]["location"] == "/results" and "cannot be read" in receipt["errors"][0]["message"]


def test_serve_http_on_a_busy_port_refuses_before_saying_it_serves(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code = main(["serve", "--http", "--no-token", "--port", str(port), "--root", str(repo)])
    err = capsys.readouterr().err
    assert code == exits.EXIT_ERROR and f"port {port} on 127.0.0.1 is already in use" in err
    assert "serving" not in err


def test_next_step_lenses_chooses_the_lenses_of_the_audit_it_starts(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    code, step = cli(capsys, "next-step", "--root", root, "--lenses", "security,tests")
    assert code == 0 and step["step_kind"] == "capability_check"
    code, step = cli(capsys, "next-step", "--root", root, "--host-can-dispatch-subagents", "true")
    plan = json.loads(Path(past_context_json(repo, step)["artifact_paths"]["plan"]).read_text())
    assert {t["lens"] for p in plan["packets"] for t in p["tasks"]} == {"security", "tests"}
    prompt = Path(plan["packets"][0]["prompt_path"]).read_text()
    assert "### Lens `security`" in prompt and "### Lens `performance`" not in prompt
    assert main(["next-step", "--root", root, "--lenses", "correctness"]) == exits.EXIT_ERROR
    err = capsys.readouterr().err
    assert "--lenses correctness was not applied: the lenses are read when an audit starts" in err
    assert "audit-mcp next-step --new-audit --lenses correctness" in err


def _blocked(repo: Path) -> None:
    """An audit whose first run failed with an authentication error: blocked until a person fixes it."""
    service = AuditService(repo)
    step = service.next_step({"can_dispatch_subagents": True})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    failures = [{"packet_id": p["packet_id"], "error": "401 invalid x-api-key"} for p in plan["packets"]]
    service.merge_and_ingest(plan["run_id"], failures)
    assert service.next_step().step_kind == "blocked"


def test_a_blocked_run_says_to_retry_with_its_own_flag_and_the_flag_clears_the_blocker(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _blocked(repo)
    assert main(["run", "--root", str(repo), "--worker", "true"]) == exits.EXIT_BLOCKED
    assert "run the same command with --retry-blocked" in capsys.readouterr().err
    code = main(["run", "--root", str(repo), "--worker", "true", "--retry-blocked", "--max-runs", "1"])
    assert code == exits.EXIT_PARTIAL, capsys.readouterr().err  # past the blocker: one run, work still open


def test_report_sarif_after_a_blocked_run_writes_the_file_the_workflow_uploads(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _blocked(repo)
    sarif_path = repo / ".audit-mcp" / "report" / "report.sarif"
    assert not sarif_path.exists()
    code, printed = cli(capsys, "report", "--root", str(repo), "--format", "sarif")
    assert code == 0 and json.loads(sarif_path.read_text()) == printed
    assert printed["runs"][0]["properties"]["provisional"] is True
