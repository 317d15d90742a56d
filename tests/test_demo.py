"""`audit-mcp demo` runs a whole audit of the bundled fixture, labelled as scripted, from an installed wheel."""

from __future__ import annotations

import email
import json
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.core.version import __version__
from audit_mcp.surfaces.cli import main
from tests.driving import run_id

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
    decoys: list[dict[str, Any]] = answer_key["decoys"]  # type: ignore[assignment]
    # The overstated decoy stays a finding (at its fair severity); the false ones are refuted, not dropped.
    overstated = {(d["file"], d["start_line"]) for d in decoys if d["truth"] == "overstated"}
    assert {(f["file"], f["start_line"]) for f in doc["findings"]} == planted | overstated
    false = {(d["file"], d["start_line"]) for d in decoys if d["truth"] == "false_positive"}
    assert {(f["file"], f["start_line"]) for f in doc["refuted"]} == false


def test_the_demo_refuses_to_overwrite_an_earlier_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--dir", str(tmp_path)]) == 0
    assert main(["demo", "--dir", str(tmp_path)]) == 1
    assert "already exists" in capsys.readouterr().err


def _build_wheel(into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(into), str(PROJECT)],
        check=True,
        capture_output=True,
        timeout=180,
    )
    (wheel,) = into.glob("*.whl")
    return wheel


def _fresh_venv(env: Path) -> Path:
    """A new venv without pip; the dependencies (mcp, pydantic ...) come from this interpreter's site-packages
    through a .pth line, placed after the venv's own site-packages so the installed wheel is what gets imported."""
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_the_wheel_installs_under_its_distribution_name_into_a_fresh_venv_and_runs(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path / "wheels")
    assert wheel.name.startswith(f"audit_mcp_server-{__version__}-"), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        meta = archive.read(f"audit_mcp_server-{__version__}.dist-info/METADATA").decode()
        entry_points = archive.read(f"audit_mcp_server-{__version__}.dist-info/entry_points.txt").decode()
    headers = email.message_from_string(meta)
    assert headers["Name"] == "audit-mcp-server"
    assert headers["Version"] == __version__
    assert headers["License-Expression"] == "MIT"
    assert "Typing :: Typed" in headers.get_all("Classifier", [])
    assert f"audit_mcp_server-{__version__}.dist-info/licenses/LICENSE" in names
    assert "audit_mcp/__main__.py" in names and "audit_mcp/py.typed" in names
    assert "audit-mcp = audit_mcp.surfaces.cli:main" in entry_points

    python = _fresh_venv(tmp_path / "env")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=180,
    )
    bin_dir = python.parent
    demo = subprocess.run(
        [str(bin_dir / "audit-mcp"), "demo", "--dir", str(tmp_path / "demo")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert demo.returncode == 0, demo.stderr
    assert "completeness complete" in demo.stdout
    assert (tmp_path / "demo" / "planted_app" / ".audit-mcp" / "report" / "report.md").is_file()

    version = subprocess.run(
        [str(python), "-m", "audit_mcp", "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"audit-mcp {__version__}"
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import audit_mcp, importlib.metadata as m; print(audit_mcp.__file__); "
            "print(m.version('audit-mcp-server'))",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert where[0].startswith(str(tmp_path / "env")), where
    assert where[1] == __version__


def test_the_version_is_written_once_and_the_changelog_names_it() -> None:
    pyproject = tomllib.loads((PROJECT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["hatch"]["version"]["path"] == "audit_mcp/core/version.py"
    assert pyproject["project"]["name"] == "audit-mcp-server"
    changelog = (PROJECT / "CHANGELOG.md").read_text()
    newest = re.search(r"^## (\S+)", changelog, re.M)
    assert newest is not None and newest.group(1) == __version__
    assert (PROJECT / "LICENSE").read_text().startswith("MIT License")


def test_no_install_line_names_a_distribution_that_is_not_published() -> None:
    """audit-mcp is installed from a clone (``.``) or from its source at a pinned ref: the name ``audit-mcp`` on
    the package index is an unrelated project, and ``audit-mcp-server`` is not published yet."""
    docs = [
        "README.md",
        "docs/github-actions-audit.yml",
        *(p.relative_to(PROJECT).as_posix() for p in (PROJECT / "docs").rglob("*.md")),
    ]
    for doc in docs:
        text = (PROJECT / doc).read_text()
        installs = re.findall(r"pip install ((?:-e )?[^\s&`]+)", text)
        assert installs or doc.startswith("docs/"), doc
        for target in installs:
            assert target in (".", '-e ".[test]"', "'.[postgresql]'") or target.startswith('"git+'), (doc, target)


def test_the_demo_ignores_an_audit_someone_ran_on_the_bundled_fixture_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from audit_mcp.surfaces import demo
    from audit_mcp.usecases.service import AuditService

    bundled = tmp_path / "bundled"
    shutil.copytree(demo.fixtures_dir(), bundled)
    # What `audit-mcp next-step --root fixtures/planted_app` leaves there: an audit in flight, dispatched.
    AuditService(bundled / "planted_app").next_step({"can_dispatch_subagents": True})
    monkeypatch.setattr(demo, "fixtures_dir", lambda: bundled)
    assert main(["demo", "--dir", str(tmp_path / "out")]) == 0
    assert "completeness complete" in capsys.readouterr().out
    out = tmp_path / "out" / "planted_app"
    plan = json.loads((out / ".audit-mcp" / "runs" / run_id(out) / "dispatch-plan.json").read_text())
    # Its own audit: the packets' prompts live in the demo's copy, not in the bundled fixture's leftovers.
    assert all(p["prompt_path"].startswith(str(tmp_path / "out")) for p in plan["packets"])
