"""Intake's scan in parts: forked copies read slices of the files, and the manifest is the one a single process
reads, hostile files included; a copy that fails has its slice read again; nothing is forked beside a thread."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.engine import scan_parts
from tests.intake_repos import first_step_cli, hostile_repo, needs_fork


def test_parts_follow_the_config_else_the_cores_and_the_size() -> None:
    assert scan_parts.parts_for(50, 3, cores=2) == 3  # set: taken as it is, even for a small repository
    assert scan_parts.parts_for(2, 8, cores=8) == 2  # never more parts than files
    assert scan_parts.parts_for(90_000, 64, cores=2) == scan_parts.MAX_AUTO_PARTS  # nor many more than cores
    assert scan_parts.parts_for(90_000, 64, cores=16) == 16
    assert scan_parts.parts_for(1_999, None, cores=8) == 1  # too small to gain from a copy
    assert scan_parts.parts_for(2_000, None, cores=8) == 2
    assert scan_parts.parts_for(20_000, None, cores=2) == 2
    assert scan_parts.parts_for(20_000, None, cores=1) == 1
    assert scan_parts.parts_for(200_000, None, cores=64) == scan_parts.MAX_AUTO_PARTS


def test_slices_are_contiguous_in_order_and_near_equal() -> None:
    names = [f"f{i}" for i in range(11)]
    pieces = scan_parts.slices(names, 3)
    assert [len(p) for p in pieces] == [4, 4, 3]
    assert [n for p in pieces for n in p] == names


def test_nothing_is_forked_while_another_thread_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_parts, "_helper", None)  # no server's helper in this process either
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        with scan_parts.split(["a", "b", "c", "d"], 2, lambda names: list(names), str) as scanning:
            assert scanning.mine == ["a", "b", "c", "d"] and scanning.others == []
            assert scanning.rest() == [] and scanning.processes == 1
    finally:
        stop.set()
        other.join()


# Run in a fresh interpreter: a test process may have threads of its own, and then nothing is forked.
_SPLIT = """
import json, os, sys
from audit_mcp.engine import scan_parts
from tests.intake_repos import first_step_cli, hostile_repo, needs_fork
from audit_mcp.surfaces.cli import exits
parent = os.getpid()
failing = sys.argv[1]

def work(names):
    if os.getpid() != parent and names[0] == "f2":
        if failing == "raise":
            raise RuntimeError("a copy that fails")
        if failing == "short":
            return [[n, os.getpid()] for n in names[1:]]
        if failing == "exit":
            os._exit(0)  # leaves without sending anything
    return [[n, os.getpid()] for n in names]

if failing == "fork":
    def refuse():
        raise BlockingIOError(11, "Resource temporarily unavailable")
    os.fork = refuse

names = [f"f{i}" for i in range(6)]
try:
    with scan_parts.split(names, 3, work, tuple) as scanning:
        got = work(scanning.mine) + scanning.rest()
        if failing == "interrupt":
            raise KeyboardInterrupt
except KeyboardInterrupt:
    got = []
try:
    os.waitpid(-1, os.WNOHANG)
    left = True
except ChildProcessError:
    left = False
print(json.dumps({"names": [n for n, _ in got], "here": [pid == parent for _, pid in got],
                  "redone": scanning.redone, "processes": scanning.processes, "children_left": left}))
"""


def _split(failing: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", _SPLIT, failing], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


@needs_fork
def test_copies_read_their_slices_and_the_caller_reads_the_first() -> None:
    out = _split("none")
    assert out["names"] == [f"f{i}" for i in range(6)]
    assert out["here"] == [True, True, False, False, False, False]
    assert out["processes"] == 3 and out["redone"] == [] and not out["children_left"]


@needs_fork
@pytest.mark.parametrize(
    ("failing", "why"),
    [
        ("raise", "the copy scanning it exited with 1"),
        ("short", "its results did not hold one entry per file"),
        ("exit", "its results were cut short"),
    ],
)
def test_a_slice_whose_copy_fails_is_read_again_by_the_caller(failing: str, why: str) -> None:
    out = _split(failing)
    assert out["names"] == [f"f{i}" for i in range(6)]
    assert out["here"] == [True, True, True, True, False, False]  # f2 and f3 read again here
    assert len(out["redone"]) == 1 and out["redone"][0].startswith("2 file(s) read again in the main process: " + why)
    assert not out["children_left"]


@needs_fork
def test_when_no_copy_can_be_forked_the_main_process_reads_every_slice() -> None:
    out = _split("fork")
    assert out["names"] == [f"f{i}" for i in range(6)] and all(out["here"])
    why = "forking a copy failed (Resource temporarily unavailable)"
    assert out["redone"] == [f"4 file(s) read in the main process: {why}"]
    assert out["processes"] == 1


@needs_fork
def test_copies_left_behind_by_an_interrupted_scan_are_killed_and_reaped() -> None:
    out = _split("interrupt")
    assert out["names"] == [] and not out["children_left"]


@needs_fork
def test_a_first_step_read_by_three_processes_records_the_manifest_one_process_reads(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    hostile_repo(root)
    alone_files, alone_edges, alone_log = first_step_cli(root, tmp_path, 1)
    split_files, split_edges, split_log = first_step_cli(root, tmp_path, 3)
    assert "read by 3 processes" in split_log and "read by" not in alone_log
    assert split_files == alone_files and split_edges == alone_edges
    reasons = {path: why for path, *_, why, _kind in split_files}
    assert reasons["blob.bin"] == "binary file" and reasons["pipe"] == "not a regular file"
    assert reasons["outside"] == "symlink that leaves the repository root (not followed)"
    assert reasons["big.py"].startswith("oversize") and reasons["minified.js"].startswith("minified")
    assert reasons["latin\\xe9.py"].startswith("the file name is not UTF-8")
    assert reasons["caf\u00e9.py"] is None and reasons["untracked.py"] is None
    assert ("pkg/area0/m0.py", "pkg/area1/m0.py") in split_edges and ("web/app.js", "web/util.js") in split_edges
