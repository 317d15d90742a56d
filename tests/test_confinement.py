"""A whole audit writes nothing outside its artifacts directory: not in the repository, not in .git, not home."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from mcp import Client

from audit_mcp.surfaces.server import build_server
from tests.conftest import ScriptedReviewer
from tests.test_e2e_mcp import drive_audit


def _tree(base: Path, *skip: Path) -> dict[str, tuple[int, str]]:
    out = {}
    for path in sorted(base.rglob("*")):
        if any(path == s or s in path.parents for s in skip):
            continue
        if path.is_symlink() or not path.is_file():
            out[path.relative_to(base).as_posix()] = (path.lstat().st_mode, "")
            continue
        stat = path.stat()
        out[path.relative_to(base).as_posix()] = (stat.st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    return out


@pytest.mark.anyio
async def test_a_whole_audit_writes_only_inside_the_artifacts_directory(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # The one place outside the artifacts directory the design allows: the learned rate-limit state.
    learned = tmp_path / "learned-state"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AUDIT_MCP_STATE_DIR", str(learned))
    monkeypatch.setenv("XDG_STATE_HOME", str(learned / "xdg"))
    artifacts = repo / ".audit-mcp"
    before = _tree(tmp_path, artifacts, learned)
    async with Client(build_server(repo)) as client:
        step = await drive_audit(client, reviewer, repo)
    assert step["step_kind"] == "present_report"
    assert _tree(tmp_path, artifacts, learned) == before
    assert (artifacts / "report" / "report.md").is_file()
