"""A multi-root server cannot mix roots: run ids never repeat across roots, every call naming a run goes to
the root that issued it, and a ``root`` the server was not started for is refused before anything is
written there."""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from audit_mcp.surfaces.server import build_server
from tests.conftest import FIXTURES, ScriptedReviewer, git
from tests.driving import call_ok
from tests.test_http import _free_port


def _copy(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(FIXTURES / "planted_app", root)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "fixture")
    return root


@contextmanager
def _serving(*args: str, log: Path) -> Iterator[str]:
    port = _free_port()
    exe = str(Path(sys.executable).with_name("audit-mcp"))
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [exe, "serve", "--http", "--no-token", "--port", str(port), *args], stdout=subprocess.DEVNULL, stderr=sink
        )
    try:
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                    break
            except OSError:
                if proc.poll() is not None:
                    raise AssertionError(log.read_text()) from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _submissions(root: Path) -> set[str]:
    conn = sqlite3.connect(root / ".audit-mcp" / "audit.sqlite3")
    try:
        return {r[0] for r in conn.execute("SELECT packet_id FROM submissions")}
    finally:
        conn.close()


@pytest.mark.anyio
async def test_two_clients_on_two_roots_of_one_http_server_never_mix_their_runs(
    tmp_path: Path, reviewer: ScriptedReviewer
) -> None:
    x, y = _copy(tmp_path, "x"), _copy(tmp_path, "y")
    caps = {"host_can_dispatch_subagents": True}
    with _serving("--root", str(x), "--allow-root", str(y), log=tmp_path / "server.log") as url:
        async with Client(url) as one, Client(url) as two:
            step_x = await call_ok(one, "next_step", caps)
            step_y = await call_ok(two, "next_step", {**caps, "root": str(y)})
            assert step_x["repo_root"] == str(x.resolve()) and step_y["repo_root"] == str(y.resolve())
            assert step_x["run_id"] != step_y["run_id"]  # both are run 1 of audit 1, in different roots
            # Run by run (the context, the review, its verification), in step on both roots.
            for _ in range(4):
                if step_x["step_kind"] != "dispatch_review" and step_y["step_kind"] != "dispatch_review":
                    break
                step_x, step_y = await _one_run_each(one, two, y, step_x, step_y, reviewer)
            assert step_x["step_kind"] == "present_report" and step_y["step_kind"] == "present_report"


async def _one_run_each(
    one: Client, two: Client, y: Path, step_x: dict[str, Any], step_y: dict[str, Any], reviewer: ScriptedReviewer
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both clients answer their root's open run, submitting in turn, merge it and take their next step."""
    x_root = Path(step_x["repo_root"])
    plans = {}
    for client, step in ((one, step_x), (two, step_y)):
        text = (await client.read_resource(f"audit://runs/{step['run_id']}/dispatch-plan")).contents[0]
        plans[step["run_id"]] = json.loads(text.text)  # type: ignore[union-attr]
    # Client one submits for its root after client two has made Y the server's latest root.
    for client, step in ((one, step_x), (two, step_y)):
        for packet in plans[step["run_id"]]["packets"]:
            args = {"run_id": step["run_id"], "packet_id": packet["packet_id"]}
            receipt = await call_ok(client, "submit_packet", {**args, "results": reviewer.results(packet)})
            assert receipt["accepted"], receipt
    # Every packet submitted in a root carries that root's tag (A1-R2-<tag>-P01): nothing crossed over.
    for root, step in ((x_root, step_x), (y, step_y)):
        tag = step["run_id"].rsplit("-", 1)[1]
        assert all(packet.split("-")[2] == tag for packet in _submissions(root))
    for client, step in ((one, step_x), (two, step_y)):
        summary = await call_ok(client, "merge_and_ingest", {"run_id": step["run_id"]})
        assert summary["packets_merged"] == len(plans[step["run_id"]]["packets"])
    return await call_ok(one, "next_step", {}), await call_ok(two, "next_step", {"root": str(y)})


@pytest.mark.anyio
async def test_a_root_the_server_was_not_started_for_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    x, other = _copy(tmp_path, "x"), _copy(tmp_path, "other")
    async with Client(build_server(x)) as client:
        for tool, args in (
            ("next_step", {"root": str(other), "host_can_dispatch_subagents": True}),
            ("audit_status", {"root": str(other)}),
            ("quota_status", {"root": str(other)}),
            ("next_step", {"root": str(tmp_path / "nowhere")}),
            ("next_step", {"root": "/"}),
        ):
            result = await client.call_tool(tool, args)
            assert result.is_error, (tool, args)
            text = result.content[0].text  # type: ignore[union-attr]
            assert "is not a root this server serves" in text and "--allow-root" in text
        assert not (other / ".audit-mcp").exists() and not (tmp_path / "nowhere").exists()
        # The served root itself, named by any path that resolves to it, is fine.
        link = tmp_path / "link"
        link.symlink_to(x)
        step = await call_ok(client, "next_step", {"root": str(link)})
        assert step["repo_root"] == str(x.resolve())


@pytest.mark.anyio
async def test_a_run_no_served_root_holds_is_refused_saying_where_it_looked(tmp_path: Path) -> None:
    x, y = _copy(tmp_path, "x"), _copy(tmp_path, "y")
    async with Client(build_server(x, allowed_roots=[y])) as client:
        await call_ok(client, "next_step", {"host_can_dispatch_subagents": True})
        receipt = await call_ok(client, "submit_packet", {"run_id": "A7-R7-abcdef", "packet_id": "P", "results": []})
        assert not receipt["accepted"]
        message = receipt["errors"][0]["message"]
        assert f"{x.resolve()} (searched)" in message and f"{y.resolve()} (no audit yet)" in message
        merged = await client.call_tool("merge_and_ingest", {"run_id": "A7-R7-abcdef"})
        assert merged.is_error and "looked in" in merged.content[0].text  # type: ignore[union-attr]
        assert not (y / ".audit-mcp").exists()  # searching never creates an artifacts directory
