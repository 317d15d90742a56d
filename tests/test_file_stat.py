"""A file's status vouches for its bytes at merge time only when nothing about it moved, hostile or not."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.core.config import SessionConfig
from audit_mcp.engine import drift, file_stat
from audit_mcp.engine.scoping import Scoper
from audit_mcp.usecases.service import AuditService
from tests.conftest import ScriptedReviewer
from tests.driving import first_review

CAPS = {"can_dispatch_subagents": True}


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file counts as changed long before it was read (the fixture's files were written just now, so
    without this their status would never vouch for them)."""
    monkeypatch.setattr(file_stat, "RACY_NS", -(10**18))


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the merge reads again, in order."""
    read: list[str] = []
    rescan = drift.rescan

    def counting(root: Path, rel: str, scoper: Scoper) -> Any:
        read.append(rel)
        return rescan(root, rel, scoper)

    monkeypatch.setattr(drift, "rescan", counting)
    return read


def _submitted(repo: Path, reviewer: ScriptedReviewer) -> tuple[AuditService, dict[str, Any]]:
    service = AuditService(repo)
    plan = json.loads(Path(first_review(service, CAPS).artifact_paths["plan"]).read_text())
    for packet in plan["packets"]:
        assert service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet)).accepted
    return service, plan


def _run_files(plan: dict[str, Any]) -> set[str]:
    return {t["file"] for p in plan["packets"] for t in p["tasks"]}


def test_a_merge_reads_again_only_the_files_whose_status_moved(
    repo: Path, reviewer: ScriptedReviewer, settled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, plan = _submitted(repo, reviewer)
    touched = repo / "app" / "cache.py"
    os.utime(touched)  # the same bytes, a new modification time
    read = _reads(monkeypatch)
    summary = service.merge_and_ingest(plan["run_id"], [])
    assert read == ["app/cache.py"]
    assert summary.tasks_requeued == 0 and not summary.requeued


def test_without_a_settled_status_every_file_of_the_run_is_read_again(
    repo: Path, reviewer: ScriptedReviewer, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, plan = _submitted(repo, reviewer)  # the fixture was copied just now: every status is racy
    read = _reads(monkeypatch)
    service.merge_and_ingest(plan["run_id"], [])
    assert set(read) == _run_files(plan) and len(read) == len(set(read))


def test_a_file_rewritten_with_its_old_size_and_modification_time_is_reviewed_again(
    repo: Path, reviewer: ScriptedReviewer, settled: None
) -> None:
    service, plan = _submitted(repo, reviewer)
    target = repo / "app" / "utils_text.py"
    before = target.stat()
    text = target.read_text()
    swapped = text.replace("return", "retUrn", 1)
    assert swapped != text and len(swapped) == len(text)
    target.write_text(swapped)
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # only the change time can tell
    summary = service.merge_and_ingest(plan["run_id"], [])
    changed = [r for r in summary.requeued if r.file == "app/utils_text.py"]
    assert changed and all("content changed after intake" in r.why for r in changed)


def test_a_file_swapped_for_a_symlink_to_the_same_bytes_is_no_longer_counted_as_reviewed(
    repo: Path, reviewer: ScriptedReviewer, settled: None
) -> None:
    service, plan = _submitted(repo, reviewer)
    target = repo / "app" / "utils_text.py"
    twin = repo / "app" / "twin.txt"
    twin.write_bytes(target.read_bytes())
    target.unlink()
    target.symlink_to("twin.txt")
    summary = service.merge_and_ingest(plan["run_id"], [])
    assert summary.tasks_requeued == 0
    assert service.explain_task(_task_of(plan, "app/utils_text.py")).state == "skipped"


def _task_of(plan: dict[str, Any], path: str) -> str:
    return next(t["task_id"] for p in plan["packets"] for t in p["tasks"] if t["file"] == path)


def test_a_status_taken_within_the_racy_window_vouches_for_nothing(tmp_path: Path) -> None:
    scoper = Scoper(SessionConfig())
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")
    st = os.lstat(path)
    last = max(st.st_mtime_ns, st.st_ctime_ns)
    assert file_stat.record(st, scoper, "a.py", last + file_stat.RACY_NS) is None
    assert file_stat.record(st, scoper, "a.py", last) is None
    proof = file_stat.record(st, scoper, "a.py", last + file_stat.RACY_NS + 1)
    assert proof is not None and file_stat.unchanged(str(path), proof, scoper, "a.py")
    # Other scope rules (another config) or another file type: read again.
    other = Scoper(SessionConfig(review_docs=not SessionConfig().review_docs))
    assert not file_stat.unchanged(str(path), proof, other, "a.py")
    link = tmp_path / "b.py"
    link.symlink_to(path)
    assert file_stat.record(os.lstat(link), scoper, "b.py", last + 10 * file_stat.RACY_NS) is None
    assert not file_stat.unchanged(str(link), proof, scoper, "b.py")
    assert not file_stat.unchanged(str(tmp_path / "gone.py"), proof, scoper, "gone.py")


def test_the_report_reads_again_only_files_whose_status_moved_and_names_those_that_changed(
    repo: Path, settled: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from audit_mcp.usecases import reporting

    service = AuditService(repo)
    first_review(service, CAPS)
    read: list[str] = []
    resolve = reporting.resolve_inside

    def counting(root: Path, rel: str) -> Path:
        read.append(rel)
        return resolve(root, rel)

    monkeypatch.setattr(reporting, "resolve_inside", counting)
    assert "changed after the audit read them" not in service.report()
    assert read == []  # every file's status vouches for the bytes the audit read
    cache = repo / "app" / "cache.py"
    before = cache.stat()
    cache.write_bytes(cache.read_bytes().replace(b"def ", b"fed ", 1))  # same size, other bytes
    os.utime(cache, ns=(before.st_atime_ns, before.st_mtime_ns))  # its modification time put back
    os.utime(repo / "app" / "db.py")  # a new modification time, the same bytes
    report = service.report()
    assert sorted(read) == ["app/cache.py", "app/db.py"]
    assert "1 file(s) changed after the audit read them: `app/cache.py`" in report
