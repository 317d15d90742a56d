"""The MCP server's intake helper: forked as ``serve`` starts, handed every slice but the server's own, and the
manifest is the one a single process reads; a helper that dies or answers wrong is stopped and reaped, and the
server reads alone; the helper leaves with its server, and a server that cannot start leaves none."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from audit_mcp.surfaces.cli import exits
from tests.driving import call_ok
from tests.intake_repos import config_for, first_step_cli, hostile_repo, manifest_of, needs_fork

_HELPER = """
import json, os, threading
from audit_mcp.engine import scan_parts
parent = os.getpid()

def work(names):
    return [[n, os.getpid()] for n in names]

def refuse_theirs(item):
    if item[1] != parent:
        raise ValueError("not a row")
    return item

helper = scan_parts.start_helper()
stop = threading.Event()
other = threading.Thread(target=stop.wait)
other.start()  # from here on nothing is forked: slices go to the helper
names = [f"f{i}" for i in range(6)]
out = {}
for run, decode in (("whole", list), ("undecodable", refuse_theirs), ("after", list)):
    with scan_parts.split(names, 2, work, decode) as scanning:
        got = work(scanning.mine) + scanning.rest()
    out[run] = {"names": [n for n, _ in got], "here": [pid == parent for _, pid in got],
                "processes": scanning.processes, "redone": scanning.redone, "alive": helper.alive}
stop.set()
other.join()
try:
    os.waitpid(-1, os.WNOHANG)
    out["children_left"] = True
except ChildProcessError:
    out["children_left"] = False
print(json.dumps(out))
"""


@needs_fork
def test_a_helper_whose_answer_cannot_be_read_is_stopped_and_its_slice_read_here() -> None:
    proc = subprocess.run([sys.executable, "-c", _HELPER], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    names = [f"f{i}" for i in range(6)]
    assert out["whole"] == {
        "names": names,
        "here": [True] * 3 + [False] * 3,
        "processes": 2,
        "redone": [],
        "alive": True,
    }
    undecodable = out["undecodable"]
    assert undecodable["names"] == names and all(undecodable["here"]) and not undecodable["alive"]
    assert undecodable["redone"][0].startswith("3 file(s) read again in the main process: its results could not")
    assert out["after"]["processes"] == 1 and all(out["after"]["here"])  # the helper is not asked again
    assert not out["children_left"]


def _naming(artifacts: Path) -> set[int]:
    """The processes with ``artifacts`` in their command line (a server and its helper share one)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if str(artifacts).encode() in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
    return found


def _server(tmp_path: Path, root: Path, artifacts: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(Path(sys.executable).with_name("audit-mcp")),
        args=[
            "serve",
            "--root",
            str(root),
            "--artifacts-dir",
            str(artifacts),
            "--config",
            str(config_for(tmp_path, 2)),
        ],
        # The same import path as this test's, so the server is the code under test.
        env={k: os.environ[k] for k in ("AUDIT_MCP_STATE_DIR", "PYTHONPATH") if k in os.environ},
    )


def _helper_of(artifacts: Path) -> int:
    """The pid of the helper: the process naming ``artifacts`` whose parent names it too."""
    pids = _naming(artifacts)
    for pid in pids:
        if _parent(pid) in pids:
            return pid
    raise AssertionError(f"no helper among {pids}")


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/status").read_text().split("PPid:")[1].split()[0])


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, zombies included (a zombie keeps its parent until reaped)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                if _parent(int(entry.name)) == pid:
                    found.append(int(entry.name))
    return found


async def _first_dispatch(client: Client) -> None:
    """The first ``next_step`` of an empty audit, which runs intake and hands out review packets."""
    step = await call_ok(client, "next_step", {"host_can_dispatch_subagents": True})
    assert step["step_kind"] == "dispatch_review", step


@pytest.fixture
def served(tmp_path: Path) -> tuple[Path, Path, list[Any], list[Any]]:
    """The hostile repository, the artifacts directory a server gets, and the manifest one process reads."""
    root = tmp_path / "repo"
    hostile_repo(root)
    alone_files, alone_edges, _ = first_step_cli(root, tmp_path, 1)
    return root, tmp_path / "artifacts-server", alone_files, alone_edges


@needs_fork
@pytest.mark.anyio
async def test_the_server_reads_with_the_helper_it_forked_at_start_which_leaves_with_it(
    tmp_path: Path, served: tuple[Path, Path, list[Any], list[Any]]
) -> None:
    root, artifacts, alone_files, alone_edges = served
    async with Client(_server(tmp_path, root, artifacts)) as client:
        assert len(_naming(artifacts)) == 2  # the server and its helper
        await _first_dispatch(client)
    files, edges, log = manifest_of(artifacts)
    assert "read by 2 processes" in log
    assert files == alone_files and edges == alone_edges
    deadline = time.monotonic() + 10
    while _naming(artifacts) and time.monotonic() < deadline:
        await anyio.sleep(0.05)
    assert not _naming(artifacts), "the helper outlived its server"


@needs_fork
@pytest.mark.anyio
async def test_a_server_whose_helper_died_reads_every_file_itself(
    tmp_path: Path, served: tuple[Path, Path, list[Any], list[Any]]
) -> None:
    root, artifacts, alone_files, alone_edges = served
    async with Client(_server(tmp_path, root, artifacts)) as client:
        helper = _helper_of(artifacts)
        server = _parent(helper)
        os.kill(helper, signal.SIGKILL)
        await _first_dispatch(client)
        assert _children(server) == []  # the dead helper was reaped, not left a zombie
    files, edges, log = manifest_of(artifacts)
    assert "read by 2 processes" not in log
    assert files == alone_files and edges == alone_edges


_BUSY_PORT = """
import os, socket, sys
from audit_mcp.engine import scan_parts
from audit_mcp.surfaces.cli import main
with socket.socket() as holder:
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    code = main(["serve", "--http", "--no-token", "--port", str(holder.getsockname()[1]), "--root", sys.argv[1]])
try:
    os.waitpid(-1, os.WNOHANG)
    left = True
except ChildProcessError:
    left = False
print(code, scan_parts._helper is None, left)
"""


@needs_fork
def test_a_server_that_cannot_start_leaves_no_helper_behind(repo: Path) -> None:
    # In a fresh interpreter, which has one thread, so the helper is forked before the port is found busy.
    proc = subprocess.run(
        [sys.executable, "-c", _BUSY_PORT, str(repo)], capture_output=True, text=True, timeout=60, check=False
    )
    assert "already in use" in proc.stderr
    assert proc.stdout.split() == [str(exits.EXIT_ERROR), "True", "False"]


@needs_fork
@pytest.mark.anyio
async def test_the_helper_parses_only_the_files_whose_facts_the_store_has_not_cached(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    hostile_repo(root)
    artifacts = tmp_path / "artifacts-server"
    # A first audit by the command line (in forked copies of its own), which records every file's facts.
    argv = ["intake", "--root", str(root), "--artifacts-dir", str(artifacts), "--config", str(config_for(tmp_path, 2))]
    proc = subprocess.run([sys.executable, "-m", "audit_mcp", *argv], capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    touched = root / "pkg" / "area0" / "m1.py"
    touched.write_text(touched.read_text() + "# read again\n")
    async with Client(_server(tmp_path, root, artifacts)) as client:
        step = await call_ok(client, "next_step", {"host_can_dispatch_subagents": True, "new_audit": True})
        assert step["step_kind"] == "dispatch_review", step
    with sqlite3.connect(artifacts / "audit.sqlite3") as db:
        first, second = [
            r[0] for r in db.execute("SELECT detail FROM ledger WHERE action = 'intake' ORDER BY entry_id")
        ]
        edges = [
            db.execute(
                "SELECT src, dst, weight, links FROM edges WHERE audit_id = ? ORDER BY src, dst", (a,)
            ).fetchall()
            for a in (1, 2)
        ]
    assert "read by 2 processes" in first and "read by 2 processes" in second
    parsed = re.search(r"facts of 0 file\(s\) from the store's cache, (\d+) parsed", first)
    assert parsed is not None, first
    assert f"facts of {int(parsed[1]) - 1} file(s) from the store's cache, 1 parsed" in second
    assert edges[0] == edges[1] and edges[0]
