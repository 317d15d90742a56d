"""The README's Quickstart, run in order in a fresh clone, leaves nothing behind that the tests then trip over.

The commands run as written, except that the virtual environment and the ``pip install`` in front of each
are the ones this test already runs in (installing twice would only test pip). The test command then runs
in the clone on the test modules that read the bundled fixture.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import git

PROJECT = Path(__file__).resolve().parent.parent
_SETUP = re.compile(r"^python3 -m venv \.venv && \. \.venv/bin/activate && pip install (?:\.|-e \"\.\[test\]\") && ")
# A later line takes the venv the first one made; here the test's own interpreter stands for it (PATH below).
_ACTIVATE = re.compile(r"^\. \.venv/bin/activate && ")
# Modules whose tests copy fixtures/planted_app; a leftover artifacts directory there broke all of them.
FIXTURE_READERS = [
    "tests/test_intake.py",
    "tests/test_matrix.py",
    "tests/test_packets.py",
    "tests/test_report_snapshot.py",
]


def quickstart_commands() -> list[str]:
    readme = (PROJECT / "README.md").read_text()
    section = readme.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)]


def fresh_clone(into: Path) -> Path:
    """The working tree as a new repository: every tracked and unignored file, committed."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=PROJECT,
        capture_output=True,
        check=True,
    ).stdout
    clone = into / "audit-mcp"
    for rel in filter(None, listed.decode().split("\0")):
        source = PROJECT / rel
        if source.is_file() and ".audit-mcp" not in Path(rel).parts:
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / rel)
    git(clone, "init", "-q")
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "clone")
    return clone


def test_the_quickstart_commands_in_order_leave_the_tests_passing(tmp_path: Path) -> None:
    commands = quickstart_commands()
    install, tests, *others = commands
    assert _SETUP.match(install) and _SETUP.match(tests), "the install commands changed: update this test"
    assert install.endswith("pip install . && audit-mcp demo"), "the first line installs from the clone"
    clone = fresh_clone(tmp_path)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "TMPDIR": str(tmp_path),  # the demo's temporary copy lands here, not in the machine's /tmp
    }
    for command in [install, *others]:
        proc = subprocess.run(
            ["bash", "-c", _ACTIVATE.sub("", _SETUP.sub("", command))],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, (command, proc.stdout, proc.stderr)
    # Every example that audits the fixture audits a copy: the clone's fixture is left as it was.
    assert not (clone / "fixtures" / "planted_app" / ".audit-mcp").exists()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
    assert status.stdout == "", "the Quickstart must leave the clone's git status clean"
    test_command = _SETUP.sub("", tests)
    assert test_command == "python -m pytest -q"
    proc = subprocess.run(
        ["bash", "-c", f"{test_command} -p no:cacheprovider {' '.join(FIXTURE_READERS)}"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout
