"""Long tool calls report progress (and log messages); the slash-command prompts steer into the loop."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import LoggingMessageNotificationParams

from audit_mcp.surfaces.server import build_server
from audit_mcp.surfaces.terminal import TerminalProgress
from tests.conftest import ScriptedReviewer


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["protocol-2025-11-25", "protocol-2026-07-28"])
async def test_next_step_and_merge_send_progress_while_they_work(
    repo: Path, reviewer: ScriptedReviewer, mode: str
) -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    logs: list[Any] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async with Client(build_server(repo), mode=mode, logging_callback=on_log) as client:  # type: ignore[arg-type]
        result = await client.call_tool(
            "next_step", {"host_can_dispatch_subagents": True}, progress_callback=on_progress
        )
        step = result.structured_content
        assert step is not None and step["step_kind"] == "dispatch_review"
        messages = [m for _, _, m in seen]
        assert [m.split(":")[0] for m in messages if m] == ["intake", "plan", "dispatch", "ready"]
        assert [p for p, _, _ in seen] == sorted(p for p, _, _ in seen)
        plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
        for packet in plan["packets"]:
            await client.call_tool(
                "submit_packet",
                {"run_id": plan["run_id"], "packet_id": packet["packet_id"], "results": reviewer.results(packet)},
            )
        seen.clear()
        merged = await client.call_tool("merge_and_ingest", {"run_id": plan["run_id"]}, progress_callback=on_progress)
        assert not merged.is_error
        assert [(p, t) for p, t, _ in seen] == [(1, 2), (2, 2)]
        assert seen[-1][2] is not None and "merged run" in seen[-1][2]
    if mode == "legacy":  # handshake-era sessions get the log messages too; later ones only when opted in
        assert any("intake" in str(d) for d in logs) and any("merged run" in str(d) for d in logs)


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["start_audit", "resume_audit", "show_report"])
async def test_every_slash_command_prompt_renders_and_points_into_the_loop(repo: Path, name: str) -> None:
    async with Client(build_server(repo)) as client:
        listed = {p.name: p for p in (await client.list_prompts()).prompts}
        with_root = await client.get_prompt(name, {"root": str(repo)})
        bare = await client.get_prompt(name, {})
    assert listed[name].title and listed[name].description
    for prompt in (with_root, bare):
        text = prompt.messages[0].content.text  # type: ignore[union-attr]
        assert str(repo) in text and "{{" not in text
        assert ("next_step" in text) if name != "show_report" else ("audit://report" in text)


def test_the_terminal_line_draws_only_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    piped, tty = io.StringIO(), Tty()
    for stream in (piped, tty):
        bar = TerminalProgress(stream, width=4)
        bar(1, 2, "merging")
        bar(3, None, "dispatch")
        bar.close()
    assert piped.getvalue() == ""
    assert "[##..] 1/2 merging" in tty.getvalue() and "[step 3] dispatch" in tty.getvalue()


def test_the_cli_stays_quiet_when_piped(repo: Path) -> None:
    exe = str(Path(sys.executable).with_name("audit-mcp"))
    proc = subprocess.run(
        [exe, "next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    assert "\r" not in proc.stderr and "[step" not in proc.stderr
    assert json.loads(proc.stdout)["step_kind"] == "dispatch_review"


def test_the_cli_draws_its_progress_line_on_a_terminal(repo: Path) -> None:
    import os
    import pty

    exe = str(Path(sys.executable).with_name("audit-mcp"))
    master, slave = pty.openpty()
    try:
        proc = subprocess.run(
            [exe, "next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true"],
            stdout=subprocess.PIPE,
            stderr=slave,
            timeout=60,
        )
        os.close(slave)
        drawn = os.read(master, 65536).decode()
    finally:
        os.close(master)
    assert proc.returncode == 0 and json.loads(proc.stdout)["step_kind"] == "dispatch_review"
    assert "[step 1] intake" in drawn and "[step 3] dispatch" in drawn
