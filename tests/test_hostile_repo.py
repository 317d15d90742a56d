"""A hostile repository: everything its git config, attributes, hooks and submodules name stays unrun.

Every repository here is built by the test (nothing hostile is committed to this project). Each vector
names a program that writes a marker file; after a whole intake (``git ls-files``, ``rev-parse``,
``status``) and an incremental one (``--since``, which runs ``git diff``), no marker may exist.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import git
from tests.driving import cli

Vector = Callable[[Path, Path, pytest.MonkeyPatch], None]


def _config(repo: Path, key: str, value: str) -> None:
    git(repo, "config", key, value)


def _touch(marker: Path) -> str:
    return f"touch {shlex.quote(str(marker))}"


def _script(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{_touch(marker)}\ncat\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def fsmonitor(repo: Path, marker: Path, mp: pytest.MonkeyPatch) -> None:
    _config(repo, "core.fsmonitor", f"{_touch(marker)}; false")


def hooks(repo: Path, marker: Path, mp: pytest.MonkeyPatch) -> None:
    for name in ("post-index-change", "reference-transaction", "post-checkout", "pre-auto-gc", "fsmonitor-watchman"):
        _script(repo / ".git" / "hooks" / name, marker)
    _script(repo / "evil-hooks" / "post-index-change", marker)
    _config(repo, "core.hooksPath", str(repo / "evil-hooks"))


def pager(repo: Path, marker: Path, mp: pytest.MonkeyPatch) -> None:
    _config(repo, "core.pager", f"{_touch(marker)}; cat")
    _config(repo, "pager.status", _touch(marker))
    _config(repo, "pager.diff", _touch(marker))
    mp.setenv("GIT_PAGER", _touch(marker))


def external_diff(repo: Path, marker: Path, mp: pytest.MonkeyPatch) -> None:
    _script(repo / ".evil" / "diff.sh", marker)
    _config(repo, "diff.external", str(repo / ".evil" / "diff.sh"))
    _config(repo, "diff.evil.command", str(repo / ".evil" / "diff.sh"))
    mp.setenv("GIT_EXTERNAL_DIFF", str(repo / ".evil" / "diff.sh"))


def textconv(repo: Path, marker: Path, mp: pytest.MonkeyPatch) -> None:
    _config(repo, "diff.evil.textconv", f"{_touch(marker)}; cat")


def filters(repo: Path, marker: Path, mp: pytest.MonkeyPatch) -> None:
    (repo / ".gitattributes").write_text("*.py filter=evil diff=evil\n*.txt filter=evil2\n*.md filter=inc\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "attributes")
    for kind in ("clean", "smudge"):
        _config(repo, f"filter.evil.{kind}", f"{_touch(marker)}; cat")
    _config(repo, "filter.evil2.process", _touch(marker))
    _config(repo, "filter.evil2.required", "true")
    # A driver defined in a file the config includes is neutralised too.
    (repo / ".evil").mkdir(exist_ok=True)
    (repo / ".evil" / "included").write_text(f'[filter "inc"]\n\tclean = "{_touch(marker)}; cat"\n')
    _config(repo, "include.path", str(repo / ".evil" / "included"))


def credential_helper(repo: Path, marker: Path, mp: pytest.MonkeyPatch) -> None:
    _config(repo, "credential.helper", f"!{_touch(marker)}")
    _config(repo, "core.askPass", str(repo / ".evil" / "diff.sh"))
    _config(repo, "core.sshCommand", _touch(marker))
    _script(repo / ".evil" / "diff.sh", marker)


def global_and_system_config(repo: Path, marker: Path, mp: pytest.MonkeyPatch) -> None:
    home = repo.parent / "evil-home"
    home.mkdir(exist_ok=True)
    hostile = f'[core]\n\tfsmonitor = "{_touch(marker)}; false"\n'
    (home / ".gitconfig").write_text(hostile)
    (home / "system-gitconfig").write_text(hostile)
    mp.setenv("HOME", str(home))
    mp.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    mp.setenv("GIT_CONFIG_SYSTEM", str(home / "system-gitconfig"))
    mp.delenv("GIT_CONFIG_NOSYSTEM", raising=False)


def inherited_environment(repo: Path, marker: Path, mp: pytest.MonkeyPatch) -> None:
    mp.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='{_touch(marker)}; false'")
    mp.setenv("GIT_CONFIG_COUNT", "1")
    mp.setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
    mp.setenv("GIT_CONFIG_VALUE_0", f"{_touch(marker)}; false")


def submodule(repo: Path, marker: Path, mp: pytest.MonkeyPatch) -> None:
    inner = repo / "vendored_lib"
    inner.mkdir()
    (inner / "lib.py").write_text("def f():\n    return 1\n")
    git(inner, "init", "-q")
    git(inner, "add", "-A")
    git(inner, "commit", "-qm", "inner")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "with an embedded repository")
    git(inner, "config", "core.fsmonitor", f"{_touch(marker)}; false")
    (inner / "lib.py").write_text("def f():\n    return 2\n")  # dirty: status would look inside


VECTORS = [
    fsmonitor,
    hooks,
    pager,
    external_diff,
    textconv,
    filters,
    credential_helper,
    global_and_system_config,
    inherited_environment,
    submodule,
]


def hostile_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "hostile"
    (repo / "app").mkdir(parents=True)
    (repo / "app" / "main.py").write_text("import os\n\n\ndef run(cmd):\n    return os.system(cmd)\n")
    (repo / "notes.txt").write_text("plain text\n")
    (repo / "README.md").write_text("# hostile\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    return repo


def _dirty(repo: Path) -> None:
    """Change tracked files after the commit, so status and diff must read their content (and filter it)."""
    for rel in ("app/main.py", "notes.txt", "README.md"):
        with (repo / rel).open("a") as handle:
            handle.write("# changed\n")
    (repo / "app" / "new.py").write_text("print('untracked')\n")


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v.__name__)
def test_nothing_a_hostile_repository_names_is_run_by_intake_or_since(
    vector: Vector, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = hostile_repo(tmp_path)
    marker = tmp_path / "pwned"
    vector(repo, marker, monkeypatch)
    _dirty(repo)
    assert not marker.exists()
    code, step = cli(capsys, "next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true")
    assert code == 0 and step["step_kind"] == "dispatch_review", step
    code, status = cli(capsys, "status", "--root", str(repo), "--json")
    assert code == 0 and status["audit_id"] == 1
    code, step = cli(
        capsys,
        "next-step",
        "--root",
        str(repo),
        "--artifacts-dir",
        str(tmp_path / "since-artifacts"),
        "--since",
        "HEAD",
        "--host-can-dispatch-subagents",
        "true",
    )
    assert code == 0 and step["step_kind"] == "dispatch_review", step
    assert not marker.exists(), f"the repository's {vector.__name__} ran a program"


def test_git_writes_nothing_into_the_repository_metadata(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = hostile_repo(tmp_path)
    _dirty(repo)
    index = repo / ".git" / "index"
    before = (index.stat().st_mtime_ns, index.read_bytes())
    code, _ = cli(capsys, "next-step", "--root", str(repo), "--since", "HEAD", "--host-can-dispatch-subagents", "true")
    assert code == 0
    assert (index.stat().st_mtime_ns, index.read_bytes()) == before
    assert not list((repo / ".git").glob("*.lock"))


def test_a_config_that_moves_the_work_tree_outside_the_root_is_not_followed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = hostile_repo(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("API_KEY = 'do-not-read'\n")
    git(repo, "config", "core.worktree", str(outside))
    code, step = cli(capsys, "next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true")
    assert code == 0 and step["step_kind"] == "dispatch_review"
    plan = Path(step["artifact_paths"]["plan"]).read_text()
    assert "secret.py" not in plan and "app/main.py" in plan


def test_the_git_runner_is_the_only_place_git_runs() -> None:
    package = Path(__file__).resolve().parent.parent / "audit_mcp"
    callers = sorted(
        p.relative_to(package).as_posix()
        for p in package.rglob("*.py")
        if re.search(r"\[\s*[\"']git[\"']\s*,", p.read_text(encoding="utf-8")) and p.name != "git.py"
    )
    assert callers == [], f"git is run outside engine/git.py: {callers}"


def test_the_hardened_environment_inherits_nothing_git_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    from audit_mcp.engine.git import HARDENING, hardened_env

    monkeypatch.setenv("GIT_DIR", "/elsewhere/.git")
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", "/bin/evil")
    env = hardened_env(HARDENING)
    assert not {k for k in env if k.startswith("GIT_") and k in os.environ and env[k] == os.environ[k]}
    assert "GIT_DIR" not in env and "GIT_EXTERNAL_DIFF" not in env
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_CONFIG_GLOBAL"] == os.devnull
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GIT_OPTIONAL_LOCKS"] == "0"
    keys = {env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"] for i in range(int(env["GIT_CONFIG_COUNT"]))}
    assert keys["core.fsmonitor"] == "false" and keys["core.hooksPath"] == os.devnull
    assert keys["credential.helper"] == "" and keys["protocol.allow"] == "never"
    out = subprocess.run(["git", "config", "--list"], env=env, capture_output=True, check=False, cwd="/")
    assert b"core.fsmonitor=false" in out.stdout


# The repository's own config --------------------------------------------------------------------------------


def _outside_sarif(tmp_path: Path) -> Path:
    """A SARIF log outside the repository whose alert text would show up in packet prompts if it were read."""
    doc = {
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "leaky"}},
                "results": [
                    {
                        "ruleId": "X1",
                        "message": {"text": "OUTSIDE-SECRET-TEXT"},
                        "locations": [{"physicalLocation": {"artifactLocation": {"uri": "app/main.py"}}}],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "x.sarif"
    path.write_text(json.dumps(doc))
    return path


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


CONFIG_VECTORS: dict[str, tuple[Callable[[Path, Path], str], str]] = {
    "parent_path": (lambda repo, out: '[analyzers]\nsarif = ["../x.sarif"]\n', "sarif[0]"),
    "absolute_path": (lambda repo, out: '[analyzers]\nsarif = ["/etc/passwd"]\n', "sarif[0]"),
    "symlink_out": (
        lambda repo, out: (
            (repo / "reports").mkdir()
            or (repo / "reports" / "a.sarif").symlink_to(out)
            or ('[analyzers]\nsarif = ["reports/a.sarif"]\n')
        ),
        "sarif[0]",
    ),
    "fifo": (
        lambda repo, out: _fifo(repo / "reports" / "p.sarif") and '[analyzers]\nsarif = ["reports/p.sarif"]\n',
        "regular file",
    ),
    "probe": (lambda repo, out: '[scheduler]\nprobe = "force"\n', "probe"),
}


@pytest.mark.parametrize("name", sorted(CONFIG_VECTORS))
def test_a_repository_config_naming_anything_outside_its_root_is_refused_with_the_key(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = hostile_repo(tmp_path)
    outside = _outside_sarif(tmp_path)
    make, named = CONFIG_VECTORS[name]
    (repo / ".audit-mcp.toml").write_text(make(repo, outside))
    code, step = cli(capsys, "next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true")
    assert code == 4 and step["step_kind"] == "blocked", step
    reason = step["reason"]
    assert named in reason and any(fix in reason for fix in ("--analyzer-sarif", "next_step again", "Remove"))
    written = "".join(
        p.read_text(errors="replace")
        for p in (repo / ".audit-mcp").rglob("*")
        if p.is_file() and p.suffix in (".md", ".json")
    )
    assert "OUTSIDE-SECRET-TEXT" not in written and "root:x:0" not in written


@pytest.mark.parametrize("kind", ["symlink_out", "fifo", "huge"])
def test_a_repository_config_file_that_is_not_a_small_regular_file_inside_the_root_is_refused(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = hostile_repo(tmp_path)
    config = repo / ".audit-mcp.toml"
    if kind == "symlink_out":
        (tmp_path / "elsewhere.toml").write_text('lenses = ["security"]\n')
        config.symlink_to(tmp_path / "elsewhere.toml")
    elif kind == "fifo":
        _fifo(config)
    else:
        config.write_text("# padding\n" * 200_000)
    code, step = cli(capsys, "next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true")
    assert code == 4 and step["step_kind"] == "blocked", step
    assert "cannot use the config" in step["reason"]


def test_the_users_own_config_may_name_a_sarif_file_anywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = hostile_repo(tmp_path)
    outside = _outside_sarif(tmp_path)
    mine = tmp_path / "mine.toml"
    mine.write_text(f'[analyzers]\nsarif = ["{outside}"]\n')
    code, step = cli(
        capsys, "next-step", "--root", str(repo), "--config", str(mine), "--host-can-dispatch-subagents", "true"
    )
    assert code == 0 and step["step_kind"] == "dispatch_review", step
    prompts = "".join(p.read_text() for p in (repo / ".audit-mcp" / "runs").rglob("*.md"))
    assert "OUTSIDE-SECRET-TEXT" in prompts


def test_every_vector_at_once_runs_nothing_reads_nothing_outside_and_does_not_hang(tmp_path: Path) -> None:
    repo = hostile_repo(tmp_path)
    marker = tmp_path / "pwned"
    # Vectors whose setup commits go first; those that poison the environment last.
    first, last = [submodule, filters], [inherited_environment, global_and_system_config]
    with pytest.MonkeyPatch.context() as mp:
        for vector in [*first, *(v for v in VECTORS if v not in first + last), *last]:
            vector(repo, marker, mp)
        env = dict(os.environ)
    marker.unlink(missing_ok=True)  # the setup's own git commands may have run a vector; only the audit counts
    _fifo(repo / "app" / "pipe.py")  # a FIFO among the sources: reading it must not wait for a writer
    (repo / "app" / "link.py").symlink_to("/etc/passwd")
    _dirty(repo)
    command = [
        sys.executable,
        "-m",
        "audit_mcp",
        "next-step",
        "--root",
        str(repo),
        "--host-can-dispatch-subagents",
        "true",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    step = json.loads(done.stdout)
    assert step["step_kind"] == "dispatch_review"
    assert not marker.exists()
    written = "".join(
        p.read_text(errors="replace")
        for p in (repo / ".audit-mcp").rglob("*")
        if p.is_file() and p.suffix in (".md", ".json")
    )
    assert "root:x:0" not in written
    skipped = json.loads(
        subprocess.run(
            [sys.executable, "-m", "audit_mcp", "report", "--root", str(repo), "--format", "json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
    )["gaps"]["skipped_files"]
    reasons = {s["file"]: s["reason"] for s in skipped}
    assert "leaves the repository" in reasons["app/link.py"]
    assert "not a regular file" in reasons.get("app/pipe.py", "not a regular file (git does not list FIFOs)")
