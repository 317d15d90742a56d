"""The CLI verbs run the same audit, JSON on stdout, with exit codes a script can rely on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from audit_mcp.surfaces.cli import build_parser, main
from tests.conftest import ScriptedReviewer
from tests.driving import cli


def test_the_cli_verbs_carry_a_whole_audit(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    code, step = cli(
        capsys, "next-step", "--root", root, "--host-can-dispatch-subagents", "true", "--host-max-active-subagents", "2"
    )
    assert code == 0 and step["step_kind"] == "dispatch_review"
    for _ in range(5):
        if step["step_kind"] != "dispatch_review":
            break
        plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
        for packet in plan["packets"]:
            results = tmp_path / f"{packet['packet_id']}.json"
            results.write_text(json.dumps(reviewer.results(packet)))
            code, receipt = cli(
                capsys,
                "submit-packet",
                "--root",
                root,
                "--run-id",
                plan["run_id"],
                "--packet-id",
                packet["packet_id"],
                "--results",
                str(results),
            )
            assert code == 0 and receipt["accepted"], receipt
        code, summary = cli(capsys, "merge-and-ingest", "--root", root, "--run-id", plan["run_id"])
        assert code == 0 and summary["packets_merged"] == len(plan["packets"])
        code, step = cli(capsys, "next-step", "--root", root)
    assert step["step_kind"] == "present_report"
    code, status = cli(capsys, "status", "--root", root, "--json")
    assert status["completeness"] == "complete" and status["coverage"]["pending"] == 0
    code, report = cli(capsys, "report", "--root", root)
    assert code == 0 and report.startswith("# Audit report")
    code, doc = cli(capsys, "report", "--root", root, "--format", "json")
    assert doc["completeness"] == "complete" and len(doc["findings"]) == len(reviewer.reported)
    code, quota = cli(capsys, "quota", "--root", root, "--host-model", "claude-sonnet-4-6")
    assert quota["limits"]["context_tokens"]["value"] == 1_000_000
    assert quota["limits"]["context_tokens"]["confidence"] == "low"


def test_a_refused_submission_exits_2_with_the_errors_on_stdout(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, step = cli(capsys, "next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true")
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    code = main(
        [
            "submit-packet",
            "--root",
            str(repo),
            "--run-id",
            plan["run_id"],
            "--packet-id",
            plan["packets"][0]["packet_id"],
            "--results",
            str(bad),
        ]
    )
    captured = capsys.readouterr()
    receipt = json.loads(captured.out)
    assert "refused" in captured.err
    assert code == 2 and not receipt["accepted"]
    assert "has no result" in receipt["errors"][0]["message"]


def test_errors_exit_1_with_a_message_on_stderr(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["merge-and-ingest", "--root", str(repo), "--run-id", "nope"])
    captured = capsys.readouterr()
    assert code == 1
    assert "run 'nope' is unknown" in captured.err and captured.out == ""


def test_results_can_come_from_stdin_through_the_installed_command(repo: Path, reviewer: ScriptedReviewer) -> None:
    exe = str(Path(sys.executable).with_name("audit-mcp"))
    step = json.loads(
        subprocess.run(
            [exe, "next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    packet = plan["packets"][0]
    proc = subprocess.run(
        [
            exe,
            "submit-packet",
            "--root",
            str(repo),
            "--run-id",
            plan["run_id"],
            "--packet-id",
            packet["packet_id"],
            "--results",
            "-",
        ],
        input=json.dumps({"results": reviewer.results(packet), "usage": {"input_tokens": 1000, "seconds": 30}}),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["accepted"] is True


def test_every_verb_has_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "verb")
    verbs = set(sub.choices)  # type: ignore[arg-type]
    assert verbs == {
        "serve",
        "next-step",
        "submit-packet",
        "plan-status",
        "merge-and-ingest",
        "quota",
        "status",
        "report",
        "ledger",
        "demo",
        "run",
        "ingest-results",
        "validate-results",
        "explain-task",
        "requeue",
        "abandon",
        "cleanup",
        "intake",
        "plan",
        "synthesize",
        "store",
        "runtime-evidence",
    }
    guide = (Path(__file__).resolve().parent.parent / "docs" / "command-line.md").read_text()
    for verb in verbs:
        assert sub.choices[verb].format_help()  # type: ignore[index]
        assert f"audit-mcp {verb}" in guide, f"docs/command-line.md does not document `audit-mcp {verb}`"
