"""Intake's scan in parts: forked copies read slices of the files, and the manifest is the one a single process
reads, hostile files included; a copy that fails has its slice read again; nothing is forked beside a thread."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from audit_mcp.engine import scan_parts
from audit_mcp.surfaces.cli import exits

needs_fork = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="intake forks copies on Linux only")


def test_parts_follow_the_config_else_the_cores_and_the_size() -> None:
    assert scan_parts.parts_for(50, 3, cores=2) == 3  # set: taken as it is, even for a small repository
    assert scan_parts.parts_for(2, 8, cores=8) == 2  # never more parts than files
    assert scan_parts.parts_for(90_000, 64, cores=2) == scan_parts.MAX_AUTO_PARTS  # nor many more than cores
    assert scan_parts.parts_for(90_000, 64, cores=16) == 16
    assert scan_parts.parts_for(7_999, None, cores=8) == 1  # too small to gain from a copy
    assert scan_parts.parts_for(8_000, None, cores=8) == 2
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


def _hostile_repo(root: Path) -> None:
    """A repository with imports between packages and the files intake must judge one by one."""
    root.mkdir()
    for area in range(4):
        pkg = root / "pkg" / f"area{area}"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        for n in range(6):
            other = (area + 1) % 4
            (pkg / f"m{n}.py").write_text(
                f"from . import m{(n + 1) % 6}\nfrom pkg.area{other}.m{n} import f{n}\n\n\ndef f{n}(x):\n"
                f"    return x + {n}\n"
            )
    (root / "web").mkdir()
    (root / "web" / "app.js").write_text('import { f } from "./util";\nexport const g = () => f();\n')
    (root / "web" / "util.js").write_text("export function f() { return 1; }\n")
    (root / "blob.bin").write_bytes(b"\x00\x01binary\x00" * 50)
    (root / "empty.py").write_text("")
    (root / "generated_pb2.py").write_text("# Generated by the protocol buffer compiler.  DO NOT EDIT!\nx = 1\n")
    (root / "big.py").write_text("x = 1\n" * 12_000)  # over max_file_bytes below
    (root / "minified.js").write_text("var a=1;" * 5_000)  # one line wider than a packet holds
    (root / "outside").symlink_to("/etc/hostname")
    (root / "inside.py").symlink_to("pkg/area0/m0.py")
    (root / "pipe").write_text("replaced by a FIFO once committed\n")
    (root / "caf\u00e9.py").write_text("def cafe():\n    return 'é'\n")
    (root.joinpath(os.fsdecode(b"latin\xe9.py"))).write_text("x = 2\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    subprocess.run(["git", "commit", "-q", "-m", "init"], cwd=root, check=True, env=env)
    (root / "untracked.py").write_text("import pkg.area1.m2\n")
    (root / "pipe").unlink()
    os.mkfifo(root / "pipe")  # a tracked name that is now a FIFO: opening it must not wait for a writer


def _config(tmp: Path, processes: int) -> Path:
    config = tmp / f"config-{processes}.toml"
    keys = f"intake_processes = {processes}\nmax_file_bytes = 60000\nmax_packet_tokens = 4000\ncontext_pass = false\n"
    config.write_text(keys)
    return config


def _manifest(artifacts: Path) -> tuple[list[Any], list[Any], str]:
    """The files and edges intake recorded, and its entry in the audit's log."""
    with sqlite3.connect(artifacts / "audit.sqlite3") as db:
        files = db.execute(
            "SELECT path, language, size, line_count, sha256, scope, skip_reason, kind FROM files ORDER BY path"
        ).fetchall()
        edges = db.execute("SELECT src, dst FROM edges ORDER BY src, dst").fetchall()
        (intake,) = db.execute("SELECT detail FROM ledger WHERE action = 'intake'").fetchone()
    return files, edges, intake


def _first_step(root: Path, tmp: Path, processes: int) -> tuple[list[Any], list[Any], str]:
    artifacts = tmp / f"artifacts-{processes}"
    argv = ["next-step", "--root", str(root), "--artifacts-dir", str(artifacts)]
    argv += ["--config", str(_config(tmp, processes)), "--host-can-dispatch-subagents", "true"]
    proc = subprocess.run(
        [sys.executable, "-m", "audit_mcp", *argv], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return _manifest(artifacts)


def _naming(artifacts: Path) -> set[int]:
    """The processes with ``artifacts`` in their command line (a server and its helper share one)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if str(artifacts).encode() in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
    return found


@needs_fork
def test_a_first_step_read_by_three_processes_records_the_manifest_one_process_reads(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _hostile_repo(root)
    alone_files, alone_edges, alone_log = _first_step(root, tmp_path, 1)
    split_files, split_edges, split_log = _first_step(root, tmp_path, 3)
    assert "read by 3 processes" in split_log and "read by" not in alone_log
    assert split_files == alone_files and split_edges == alone_edges
    reasons = {path: why for path, *_, why, _kind in split_files}
    assert reasons["blob.bin"] == "binary file" and reasons["pipe"] == "not a regular file"
    assert reasons["outside"] == "symlink that leaves the repository root (not followed)"
    assert reasons["big.py"].startswith("oversize") and reasons["minified.js"].startswith("minified")
    assert reasons["latin\\xe9.py"].startswith("the file name is not UTF-8")
    assert reasons["caf\u00e9.py"] is None and reasons["untracked.py"] is None
    assert ("pkg/area0/m0.py", "pkg/area1/m0.py") in split_edges and ("web/app.js", "web/util.js") in split_edges


def _server(tmp_path: Path, root: Path, artifacts: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(Path(sys.executable).with_name("audit-mcp")),
        args=["serve", "--root", str(root), "--artifacts-dir", str(artifacts), "--config", str(_config(tmp_path, 2))],
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


@pytest.fixture
def served(tmp_path: Path) -> tuple[Path, Path, list[Any], list[Any]]:
    """The hostile repository, the artifacts directory a server gets, and the manifest one process reads."""
    root = tmp_path / "repo"
    _hostile_repo(root)
    alone_files, alone_edges, _ = _first_step(root, tmp_path, 1)
    return root, tmp_path / "artifacts-server", alone_files, alone_edges


@needs_fork
@pytest.mark.anyio
async def test_the_server_reads_with_the_helper_it_forked_at_start_which_leaves_with_it(
    tmp_path: Path, served: tuple[Path, Path, list[Any], list[Any]]
) -> None:
    root, artifacts, alone_files, alone_edges = served
    async with Client(_server(tmp_path, root, artifacts)) as client:
        assert len(_naming(artifacts)) == 2  # the server and its helper
        step = (await client.call_tool("next_step", {"host_can_dispatch_subagents": True})).structured_content
        assert step["step_kind"] == "dispatch_review", step
    files, edges, log = _manifest(artifacts)
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
        step = (await client.call_tool("next_step", {"host_can_dispatch_subagents": True})).structured_content
        assert step["step_kind"] == "dispatch_review", step
        assert _children(server) == []  # the dead helper was reaped, not left a zombie
    files, edges, log = _manifest(artifacts)
    assert "read by 2 processes" not in log
    assert files == alone_files and edges == alone_edges


_BUSY_PORT = """
import os, socket, sys
from audit_mcp.engine import scan_parts
from audit_mcp.surfaces.cli import main
with socket.socket() as holder:
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    code = main(["serve", "--http", "--port", str(holder.getsockname()[1]), "--root", sys.argv[1]])
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
