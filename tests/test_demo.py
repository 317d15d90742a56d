"""`audit-mcp demo` runs a whole audit of the bundled fixture, labelled as scripted, from an installed wheel."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from audit_mcp.surfaces.cli import main

PROJECT = Path(__file__).resolve().parent.parent


def test_the_demo_finishes_the_audit_and_says_where_the_report_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], answer_key: dict[str, object]
) -> None:
    code = main(["demo", "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "SCRIPTED" in out and "no model judged this code" in out
    report_line = next(line for line in out.splitlines() if line.startswith("report: "))
    report = Path(report_line.removeprefix("report: "))
    assert report == tmp_path / "planted_app" / ".audit-mcp" / "report" / "report.md"
    assert report.read_text().startswith("# Audit report")
    doc = json.loads(report.with_suffix(".json").read_text())
    assert doc["completeness"] == "complete"
    planted = {(i["file"], i["start_line"]) for i in answer_key["issues"]}  # type: ignore[index]
    assert {(f["file"], f["start_line"]) for f in doc["findings"]} == planted


def test_the_demo_refuses_to_overwrite_an_earlier_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--dir", str(tmp_path)]) == 0
    assert main(["demo", "--dir", str(tmp_path)]) == 1
    assert "already exists" in capsys.readouterr().err


def test_the_demo_runs_from_a_built_wheel_outside_the_source_tree(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(PROJECT)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    site = tmp_path / "site"
    with zipfile.ZipFile(next(wheels.glob("audit_mcp-*.whl"))) as wheel:
        wheel.extractall(site)
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import audit_mcp, audit_mcp.surfaces.cli; "
        "assert audit_mcp.__file__.startswith(sys.argv[1]), audit_mcp.__file__; "
        "sys.exit(audit_mcp.surfaces.cli.main(['demo', '--dir', sys.argv[2]]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(site), str(tmp_path / "demo")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "completeness complete" in proc.stdout
    assert (tmp_path / "demo" / "planted_app" / ".audit-mcp" / "report" / "report.md").is_file()
