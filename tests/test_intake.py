"""Intake: what is in scope, what is skipped and why, and the import edges."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.intake import build_manifest
from audit_mcp.store.records import FileRow
from tests.conftest import git


def _by_path(root: Path, config: SessionConfig | None = None) -> dict[str, tuple[str, str | None]]:
    manifest = build_manifest(root, root / ".audit-mcp", config or SessionConfig())
    return {f.path: (f.scope, f.skip_reason) for f in manifest.files}


def test_a_plain_directory_honours_gitignore_and_records_skips_with_reasons(plain_repo: Path) -> None:
    (plain_repo / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    (plain_repo / "build").mkdir()
    (plain_repo / "build" / "out.py").write_text("x = 1\n")
    (plain_repo / "escape.txt").symlink_to("/etc/hostname")
    files = _by_path(plain_repo)
    assert "debug.log" not in files and "build/out.py" not in files
    assert files["app/db.py"] == ("review", None)
    assert files["web/static/render.js"] == ("review", None)
    assert files["vendor/left-pad.js"][1].startswith("vendored")
    assert files["app/schema_pb2.py"][1].startswith("generated")
    assert files["logo.png"][1] == "binary file"
    assert files["escape.txt"][1] == "symlink that leaves the repository root (not followed)"
    assert files["README.md"][1].startswith("documentation")


def test_a_git_repository_lists_tracked_and_unignored_files_and_never_the_artifacts(repo: Path) -> None:
    (repo / ".audit-mcp").mkdir()
    (repo / ".audit-mcp" / "x.py").write_text("print(1)\n")
    (repo / "new_module.py").write_text("import os\n")
    files = _by_path(repo)
    assert "new_module.py" in files and "debug.log" not in files
    assert not any(p.startswith(".audit-mcp") for p in files)


def test_include_and_exclude_globs_narrow_the_scope_and_each_file_left_out_names_its_rule(repo: Path) -> None:
    files = _by_path(repo, SessionConfig(include=["app/**"], exclude=["*.tmp", "app/jobs.py"]))
    assert files["app/db.py"][0] == "review"
    assert files["app/jobs.py"] == ("skipped", "left out by the config: exclude pattern 'app/jobs.py' of the config")
    assert files["web/server.js"] == ("skipped", "left out by the config: no include pattern of the config matches it")


def test_oversize_files_are_skipped_with_the_limit_named(repo: Path) -> None:
    (repo / "big.py").write_text("x = 1\n" * 2000)
    files = _by_path(repo, SessionConfig(max_file_bytes=5_000))
    assert files["big.py"][1].startswith("oversize: 12000 bytes > max_file_bytes 5000")


def test_import_edges_are_read_for_python_and_javascript(repo: Path) -> None:
    manifest = build_manifest(repo, repo / ".audit-mcp", SessionConfig())
    edges = set(manifest.edges)
    assert ("app/handlers.py", "app/db.py") in edges
    assert ("app/handlers.py", "app/cache.py") in edges
    assert ("web/server.js", "web/api.js") in edges
    assert any(src == "web/static/api.js" or dst == "web/static/render.js" for src, dst in edges)


def test_the_snapshot_records_head_and_dirtiness(repo: Path) -> None:
    clean = build_manifest(repo, repo / ".audit-mcp", SessionConfig())
    assert clean.git_head and not clean.git_dirty
    (repo / "app" / "db.py").write_text("changed = True\n")
    dirty = build_manifest(repo, repo / ".audit-mcp", SessionConfig())
    assert dirty.git_dirty and dirty.digest != clean.digest
    git(repo, "status")


def _with_size_at_fstat(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """Every ``fstat`` says the file had ``size`` bytes: as if it grew or shrank between fstat and read."""
    real = os.fstat

    def fstat(fd: int) -> os.stat_result:
        st = real(fd)
        fields = list(st)
        fields[stat.ST_SIZE] = size
        return os.stat_result(fields, {"st_mtime_ns": st.st_mtime_ns, "st_ctime_ns": st.st_ctime_ns})

    monkeypatch.setattr(os, "fstat", fstat)


@pytest.mark.parametrize("size_at_fstat", [0, 100, 4_999], ids=["was-empty", "was-small", "one-byte-under"])
def test_a_file_that_grows_past_the_limit_while_read_is_skipped_as_oversize(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size_at_fstat: int
) -> None:
    (tmp_path / "grows.py").write_bytes(b"x = 1\n" * 2_000)
    _with_size_at_fstat(monkeypatch, size_at_fstat)
    row = build_manifest(tmp_path, tmp_path / ".audit-mcp", SessionConfig(max_file_bytes=5_000)).files[0]
    assert (row.scope, row.size) == ("skipped", 5_001)
    assert row.skip_reason == "oversize: more than max_file_bytes 5000 (raise it in the config)"


@pytest.mark.parametrize(
    "size_at_fstat", [0, 6, 11_999, 12_001, 20_000], ids=["grew", "grew", "grew", "shrank", "shrank"]
)
def test_a_file_whose_size_moved_while_read_is_hashed_with_every_byte_it_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size_at_fstat: int
) -> None:
    data = b"x = 1\n" * 2_000
    (tmp_path / "moves.py").write_bytes(data)
    _with_size_at_fstat(monkeypatch, size_at_fstat)
    row = build_manifest(tmp_path, tmp_path / ".audit-mcp", SessionConfig()).files[0]
    assert (row.scope, row.size, row.line_count) == ("review", len(data), 2_000)
    assert row.sha256 == hashlib.sha256(data).hexdigest()


def test_every_row_is_the_file_row_its_fields_make(repo: Path) -> None:
    (repo / "gone.py").write_text("x = 1\n")
    git(repo, "add", "gone.py")
    (repo / "gone.py").unlink()
    rows = build_manifest(repo, repo / ".audit-mcp", SessionConfig()).files
    assert {row.scope for row in rows} == {"review", "skipped"}
    for row in rows:
        made = FileRow(**vars(row))
        assert (row, vars(row), repr(row)) == (made, vars(made), repr(made))
