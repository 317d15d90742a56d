"""A reviewer without the MCP tools follows its packet prompt's shell fallback as written, with a plain PATH,
and its submission is accepted: the command names this installation by absolute path, the results folder
exists, and the answer template lists every task of the packet."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from tests.driving import first_review_over_mcp

PLAIN_PATH = "/usr/bin:/bin"


def _shell_fallback(prompt: str) -> tuple[Path, str, list[dict[str, Any]]]:
    """What the prompt tells a reviewer with a shell: where to write, what to run, the answer to fill in."""
    section = prompt.split("2. **With a shell**", 1)[1]
    results_path = Path(re.search(r"write the JSON array to\s+`([^`]+)`", section).group(1))  # type: ignore[union-attr]
    command = re.search(r"```\n(.*?)\n\s*```", section, re.S).group(1).strip()  # type: ignore[union-attr]
    skeleton = re.search(r"```json\n(.*?)\n```", section, re.S).group(1)  # type: ignore[union-attr]
    return results_path, command, json.loads(skeleton)


def _fill(skeleton: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**item, "summary": f"Read the file of {item['task_id']} in full under its lens; traced every input."}
        for item in skeleton
    ]


@pytest.mark.anyio
async def test_a_reviewer_with_a_plain_path_submits_with_the_command_its_prompt_gives(repo: Path) -> None:
    (repo / ".audit-mcp.toml").write_text("max_packet_tokens = 200000\n")  # one packet with many tasks
    server = Path(sys.executable).parent / "audit-mcp"
    params = StdioServerParameters(
        command=str(server),  # the host starts the server by absolute path, as the README suggests
        args=["serve", "--root", str(repo)],
        env={"AUDIT_MCP_STATE_DIR": os.environ["AUDIT_MCP_STATE_DIR"], "PATH": PLAIN_PATH},
    )
    async with Client(params) as client:
        step = await first_review_over_mcp(client)
        assert step["step_kind"] == "dispatch_review", step
        plan = json.loads((Path(step["artifact_paths"]["plan"])).read_text())
        packet = max(plan["packets"], key=lambda p: len(p["tasks"]))
        assert len(packet["tasks"]) > 3
        prompt = Path(packet["prompt_path"]).read_text()
    results_path, command, skeleton = _shell_fallback(prompt)
    assert [item["task_id"] for item in skeleton] == [t["task_id"] for t in packet["tasks"]]
    assert results_path.parent.is_dir(), "the folder the prompt tells the reviewer to write into must exist"
    results_path.write_text(json.dumps(_fill(skeleton)))
    proc = subprocess.run(
        ["bash", "-c", command], cwd=repo, env={"PATH": PLAIN_PATH, "HOME": str(repo)}, capture_output=True, text=True
    )
    assert proc.returncode == 0, (command, proc.stdout, proc.stderr)
    receipt = json.loads(proc.stdout)
    assert receipt["accepted"] and receipt["tasks_covered"] == len(packet["tasks"])
