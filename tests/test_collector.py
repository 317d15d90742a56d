"""The cycle collector waits while a step builds its objects, and runs again when the step ends."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from audit_mcp.core import collector
from audit_mcp.usecases.service import AuditService


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generation of every cycle collection that starts while the test runs."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(note)
    try:
        yield seen
    finally:
        gc.callbacks.remove(note)


def _big_repo(root: Path) -> Path:
    for n in range(300):
        folder = root / f"pkg{n % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{n}.py").write_text(f"import os\nfrom pkg{(n + 1) % 7} import mod{n + 1}\n\nVALUE = {n}\n")
    return root


def test_the_first_step_runs_no_cycle_collection_and_the_collector_runs_again_after_it(
    tmp_path: Path, collections: list[int]
) -> None:
    repo = _big_repo(tmp_path / "repo")
    service = AuditService(repo, tmp_path / "artifacts")
    # How many collections had started at each progress report: from the first report of intake to the
    # last of dispatch, the step's work.
    marks: list[tuple[str, int]] = []
    step = service.next_step(
        {"can_dispatch_subagents": True},
        progress=lambda done, total, message: marks.append((message, len(collections))),
    )
    assert step.step_kind in ("dispatch_context", "dispatch_review")
    messages = [m for m, _ in marks]
    assert any(m.startswith("intake") for m in messages) and any(m.startswith("dispatch") for m in messages)
    during = marks[-1][1] - marks[0][1]
    assert during == 0, f"{during} cycle collections ran between intake's first report and dispatch's last"
    assert gc.isenabled()
    # The objects the step allocated count toward the next collection, which comes on its own.
    before = len(collections)
    junk = [[] for _ in range(3 * gc.get_threshold()[0])]
    assert len(collections) > before, "the collector did not run again after the step"
    del junk


def test_a_program_that_turned_the_collector_off_keeps_it_off(tmp_path: Path) -> None:
    repo = _big_repo(tmp_path / "repo")
    gc.disable()
    try:
        AuditService(repo, tmp_path / "artifacts").next_step({"can_dispatch_subagents": True})
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_holders_resume_the_collector_only_when_the_last_one_ends() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    states: list[bool] = []

    def first() -> None:
        with collector.paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with collector.paused():
            second_in.set()
            first_out.wait(5)
            states.append(gc.isenabled())  # the first holder has ended; this one still holds
        states.append(gc.isenabled())

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert states == [False, True]


def test_a_merge_runs_no_cycle_collection(tmp_path: Path, collections: list[int]) -> None:
    repo = _big_repo(tmp_path / "repo")
    (repo / ".audit-mcp.toml").write_text("context_pass = false\nverification_pass = false\n")
    service = AuditService(repo, tmp_path / "artifacts")
    step = service.next_step({"can_dispatch_subagents": True})
    assert step.run_id is not None
    marks: list[tuple[str, int]] = []
    service.merge_and_ingest(
        step.run_id, [], progress=lambda done, total, message: marks.append((message, len(collections)))
    )
    assert marks and marks[-1][1] == marks[0][1], "cycle collections ran during the merge"
    assert gc.isenabled()
