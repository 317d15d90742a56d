"""Files are known by kind (source, test, build, config, markup, docs, data), from their name, extension,
shebang and git attributes, and every cell of the matrix asks a lens that can apply to its file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.file_kinds import FileKind, file_kind
from audit_mcp.engine.languages import detect_language
from audit_mcp.engine.scoping import Scoper
from tests.conftest import git
from tests.driving import cli, past_context_json
from tests.sdist_shape import FILES, NEVER_REVIEWED, lens_can_apply, write_sdist


@pytest.mark.parametrize(
    ("path", "head", "language", "kind"),
    [
        ("bin/deploy", b"#!/usr/bin/env bash\nset -eu\n", "shell", FileKind.SOURCE),
        ("scripts/release", b"#!/usr/bin/env -S python3 -u\n", "python", FileKind.SOURCE),
        ("tools/gen", b"#!/usr/local/bin/node\n", "javascript", FileKind.SOURCE),
        ("run.cgi", b"#!/usr/bin/perl -w\n", "perl", FileKind.SOURCE),
        ("NOTES", b"plain words\n", "text", FileKind.DOCS),
        ("Containerfile", b"FROM python\n", "dockerfile", FileKind.BUILD),
        ("Dockerfile.dev", b"FROM python\n", "dockerfile", FileKind.BUILD),
        ("deploy/api.dockerfile", b"FROM python\n", "dockerfile", FileKind.BUILD),
        ("Makefile", b"all:\n", "make", FileKind.BUILD),
        ("docs/Makefile", b"help:\n", "make", FileKind.BUILD),
        ("docs/make.bat", b"@ECHO OFF\n", "batch-build", FileKind.BUILD),
        ("Jenkinsfile", b"pipeline {}\n", "groovy", FileKind.BUILD),
        ("setup.py", b"from setuptools import setup\n", "python", FileKind.BUILD),
        (".github/workflows/ci.yml", b"on: push\n", "yaml", FileKind.BUILD),
        ("CMakeLists.txt", b"project(x)\n", "cmake", FileKind.BUILD),
        ("tox.ini", b"[tox]\n", "ini", FileKind.CONFIG),
        ("setup.cfg", b"[metadata]\n", "ini", FileKind.CONFIG),
        ("MANIFEST.in", b"include x\n", "manifest-in", FileKind.CONFIG),
        ("requirements/dev.txt", b"pytest\n", "requirements", FileKind.CONFIG),
        ("docs/conf.py", b"project = 'x'\n", "python", FileKind.CONFIG),
        (".env", b"TOKEN=x\n", "dotenv", FileKind.CONFIG),
        ("tests/data/sample.json", b"{}\n", "json", FileKind.DATA),
        ("artwork/logo.svg", b"<svg/>\n", "svg", FileKind.DATA),
        ("web/site.css", b"a {}\n", "css", FileKind.DATA),
        ("web/index.html", b"<html>\n", "html", FileKind.MARKUP),
        ("tests/test_core.py", b"def test(): pass\n", "python", FileKind.TEST),
        ("src/pkg/core_test.go", b"package pkg\n", "go", FileKind.TEST),
        ("web/app.spec.ts", b"it()\n", "typescript", FileKind.TEST),
        ("conftest.py", b"import pytest\n", "python", FileKind.TEST),
        ("src/click/core.py", b"import os\n", "python", FileKind.SOURCE),
        ("README.rst", b"Click\n", "rst", FileKind.DOCS),
        # Names with leading, doubled or no dots; folders named like kinds at any depth, in any case.
        (".bashrc", b"alias ll=ls\n", "text", FileKind.DOCS),
        ("..hidden", b"x\n", "text", FileKind.DOCS),
        ("conf/.eslintrc.json", b"{}\n", "json", FileKind.CONFIG),
        ("src/archive.tar.gz", b"x\n", "gz", FileKind.SOURCE),
        ("src/pkg.v2/module.PY", b"import os\n", "python", FileKind.SOURCE),
        ("Tests/Unit/helpers.py", b"import os\n", "python", FileKind.TEST),
        ("src/tests/fixtures/conf.yaml", b"a: 1\n", "yaml", FileKind.DATA),
        ("pkg/fixtures/settings.toml", b"a = 1\n", "toml", FileKind.DATA),
        ("pkg/settings.toml", b"a = 1\n", "toml", FileKind.CONFIG),
        ("site/Docs/conf.py", b"project = 'x'\n", "python", FileKind.CONFIG),
        ("site/conf.py", b"project = 'x'\n", "python", FileKind.SOURCE),
        ("src/FooTest.java", b"class FooTest {}\n", "java", FileKind.TEST),
        ("src/footest.java", b"class footest {}\n", "java", FileKind.SOURCE),
        ("deps/REQUIREMENTS/base.in", b"click\n", "requirements", FileKind.CONFIG),
        ("ci/dev-requirements.txt", b"pytest\n", "requirements", FileKind.CONFIG),
        ("ci/constraints.txt", b"pytest<9\n", "requirements", FileKind.CONFIG),
        ("ci/notes.txt", b"words\n", "text", FileKind.DOCS),
    ],
)
def test_name_extension_and_shebang_give_language_and_kind(path: str, head: bytes, language: str, kind: str) -> None:
    assert detect_language(path, head) == language
    assert file_kind(path, language) == kind


def _audit(root: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first step's dispatch plan and the report (JSON) of an audit of ``root`` started on the CLI."""
    code, step = cli(capsys, "next-step", "--root", str(root), "--host-can-dispatch-subagents", "true", *extra)
    step = past_context_json(root, step)
    assert code == 0 and step["step_kind"] == "dispatch_review", step
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    code, report = cli(capsys, "report", "--root", str(root), "--format", "json")
    assert code == 0
    return plan, report


def test_a_click_shaped_sdist_asks_no_lens_that_cannot_apply(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_sdist(tmp_path / "click-8.1.7")
    plan, report = _audit(root, capsys)
    cells = {(t["file"], t["lens"]) for p in plan["packets"] for t in p["tasks"]}
    wrong = sorted(cell for cell in cells if not lens_can_apply(*cell))
    assert wrong == [], f"cells that ask a lens that cannot apply: {wrong}"
    reviewed = {file for file, _lens in cells}
    for path in FILES:
        assert (path in reviewed) != path.startswith(NEVER_REVIEWED), path
    # Real code still gets every lens, and what only a shebang or a well-known name identifies is reviewed.
    assert {lens for file, lens in cells if file == "src/click/core.py"} == {
        "security",
        "correctness",
        "error_handling",
        "concurrency",
        "performance",
        "maintainability",
    }
    assert ("bin/deploy", "security") in cells and ("Containerfile", "security") in cells
    skipped = {s["file"]: s["reason"] for s in report["gaps"]["skipped_files"]}
    assert "no lens reads data" in skipped["artwork/logo.svg"]
    assert skipped["README.rst"].startswith("documentation")
    assert skipped["src/click.egg-info/SOURCES.txt"].startswith("generated")
    prompts = "\n".join(Path(p["prompt_path"]).read_text() for p in plan["packets"])
    assert "| `bin/deploy` | source | shell |" in prompts
    assert "| `Containerfile` | build | dockerfile |" in prompts


def test_lens_rules_still_override_the_map_by_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = write_sdist(tmp_path / "click")
    (root / ".audit-mcp.toml").write_text(
        '[[lens_rules]]\nglob = "tests/**"\nlenses = ["security", "tests"]\n\n'
        '[[lens_rules]]\nglob = "artwork/*.svg"\nlenses = ["security"]\n'
    )
    plan, _report = _audit(root, capsys)
    cells = {(t["file"], t["lens"]) for p in plan["packets"] for t in p["tasks"]}
    assert {lens for file, lens in cells if file == "tests/test_core.py"} == {"security", "tests"}
    assert ("artwork/logo.svg", "security") in cells


def test_a_lens_set_that_reads_no_file_of_a_kind_skips_those_files_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_sdist(tmp_path / "click")
    (root / ".audit-mcp.toml").write_text('lenses = ["concurrency"]\n')
    plan, report = _audit(root, capsys)
    cells = {(t["file"], t["lens"]) for p in plan["packets"] for t in p["tasks"]}
    assert {file for file, _ in cells} >= {"src/click/core.py", "bin/deploy"}
    skipped = {s["file"]: s["reason"] for s in report["gaps"]["skipped_files"]}
    assert skipped["tox.ini"] == (
        "a config file, and none of this audit's lenses (concurrency) reads config files; correctness, "
        "security would (add one to `lenses`, or a [[lens_rules]] entry)"
    )
    assert "tests/test_core.py" in skipped


def test_gitattributes_linguist_marks_override_the_heuristics_both_ways(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "gen").mkdir()
    (repo / "gen" / "client.py").write_text("def call():\n    return 1\n")
    (repo / "third").mkdir()
    (repo / "third" / "lib.js").write_text("module.exports = 1;\n")
    (repo / "notes").mkdir()
    (repo / "notes" / "howto.py").write_text("print('see the wiki')\n")
    (repo / ".gitattributes").write_text(
        "gen/** linguist-generated\n"
        "third/** linguist-vendored=true\n"
        "vendor/left-pad.js -linguist-vendored\n"
        "app/schema_pb2.py linguist-generated=false\n"
        "notes/*.py linguist-documentation\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "attributes")
    plan, report = _audit(repo, capsys)
    reviewed = {t["file"] for p in plan["packets"] for t in p["tasks"]}
    skipped = {s["file"]: s["reason"] for s in report["gaps"]["skipped_files"]}
    assert skipped["gen/client.py"] == "generated (linguist-generated in .gitattributes)"
    assert skipped["third/lib.js"] == "vendored (linguist-vendored in .gitattributes)"
    assert skipped["notes/howto.py"].startswith("documentation")
    # Unset marks keep what the name, the folder or the header would have skipped.
    assert {"vendor/left-pad.js", "app/schema_pb2.py"} <= reviewed


@pytest.mark.parametrize("where", ["subfolder", "info", "above the root"])
def test_linguist_marks_are_read_wherever_an_attributes_file_is(tmp_path: Path, where: str) -> None:
    from audit_mcp.core.config import SessionConfig
    from audit_mcp.engine.intake import build_manifest

    top = tmp_path / "top"
    root = top / "service" if where == "above the root" else top
    (root / "gen").mkdir(parents=True)
    (root / "gen" / "client.py").write_text("def call():\n    return 1\n")
    (root / "app.py").write_text("print('hi')\n")
    git(top, "init", "-q")
    if where == "subfolder":
        (root / "gen" / ".gitattributes").write_text("client.py linguist-generated\n")
    elif where == "info":
        (top / ".git" / "info").mkdir(exist_ok=True)
        (top / ".git" / "info" / "attributes").write_text("gen/** linguist-generated\n")
    else:
        (top / ".gitattributes").write_text("service/gen/** linguist-generated\n")
    manifest = build_manifest(root, root / ".audit-mcp", SessionConfig())
    reasons = {f.path: f.skip_reason for f in manifest.files}
    assert reasons["gen/client.py"] == "generated (linguist-generated in .gitattributes)"
    assert reasons["app.py"] is None


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("vendor/lib/util.py", "vendored (third-party code under a vendor directory)"),
        ("src/Node_Modules/left-pad/index.js", "vendored (third-party code under a vendor directory)"),
        ("src/vendor.py", None),
        ("pkg.egg-info/setup.py", "generated (packaging metadata written by a build)"),
        ("build/Pkg.EGG-INFO/top.py", "generated (packaging metadata written by a build)"),
        ("src/egg-info.py", None),
        ("web/app.min.js", "generated (file name marks it as generated or minified)"),
        ("Poetry.lock", "generated (dependency lock file)"),
        ("src/app.py", None),
    ],
)
def test_vendored_and_generated_folders_are_known_at_any_depth_and_in_any_case(path: str, reason: str | None) -> None:
    scoper = Scoper(SessionConfig())
    language = detect_language(path)
    assert scoper.by_path(path, scoper.kind(path, language)) == reason
