"""The command line as a new user meets it: looking never writes, refusals say where they looked, and
``status`` names what it skipped and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit_mcp.surfaces.cli import main
from tests.driving import cli


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
