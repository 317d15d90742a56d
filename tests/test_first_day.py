"""A stranger's first day: every option applies or is refused with the command that would apply it, printed
commands work as pasted, the CI path survives partial runs, reports keep their history, and errors say what
to do."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from mcp import Client

from audit_mcp.surfaces.cli import exits, main
from audit_mcp.surfaces.server import build_server
from tests.driving import cli, opinions, past_context_json

NEXT = ("--host-can-dispatch-subagents", "true", "--host-max-active-subagents", "4")


def test_since_on_an_audit_that_started_without_it_is_refused_with_the_command_that_applies_it(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    code, step = cli(capsys, "next-step", "--root", root, *NEXT)
    assert code == 0 and step["step_kind"] == "dispatch_review"
    code = main(["next-step", "--root", root, "--since", "HEAD~1", *NEXT])
    err = capsys.readouterr().err
    assert code == exits.EXIT_ERROR
    assert "--since HEAD~1 was not applied" in err and "started without --since" in err
    assert "audit-mcp next-step --new-audit --since HEAD~1" in err and "Nothing changed" in err


def test_a_resumed_run_may_repeat_the_options_its_audit_started_with(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    code, first = cli(capsys, "next-step", "--root", root, "--since", "HEAD", "--lenses", "security", *NEXT)
    assert code == 0, first
    code, again = cli(capsys, "next-step", "--root", root, "--since", "HEAD", "--lenses", "security", *NEXT)
    assert code == 0 and again["run_id"] == first["run_id"]
    code, _ = cli(capsys, "next-step", "--root", root, "--since", "HEAD~0", *NEXT)
    assert code == exits.EXIT_ERROR  # another value: refused, the audit left as it was


@pytest.mark.anyio
async def test_over_mcp_an_option_only_a_new_audit_reads_is_refused_with_what_to_call(repo: Path) -> None:
    async with Client(build_server(repo)) as client:
        first = await client.call_tool("next_step", {"host_can_dispatch_subagents": True})
        assert not first.is_error
        refused = await client.call_tool("next_step", {"since": "HEAD~1"})
    assert refused.is_error
    text = refused.content[0].text  # type: ignore[union-attr]
    assert "--since HEAD~1 was not applied" in text and "new_audit=true and since" in text


def _code_blocks(prompt: str) -> list[str]:
    """The one-line commands a step prompt shows in code blocks."""
    parts = prompt.split("```")
    return [block.strip() for block in parts[1::2] if block.strip() and "\n" not in block.strip()]


def _bash(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_every_command_a_step_prompt_prints_works_as_pasted(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo)
    code, step = cli(capsys, "next-step", "--root", root)
    assert step["step_kind"] == "capability_check"
    can, cannot = _code_blocks(Path(step["prompt_path"]).read_text())
    assert "true|false" not in can and " N" not in can.split("--host-max-active-subagents")[1][:3]
    done = _bash(cannot, tmp_path)  # this host cannot launch subagents: it reviews one packet at a time
    assert done.returncode == 0, done.stderr
    step = json.loads(done.stdout)
    assert step["step_kind"] == "single_task_fallback"
    (submit,) = _code_blocks(Path(step["prompt_path"]).read_text())
    packet = json.loads(Path(step["artifact_paths"]["plan"]).read_text())["packets"][0]
    results = Path(shlex.split(submit)[shlex.split(submit).index("--results") + 1])
    results.write_text(json.dumps(opinions().results(packet)))
    done = _bash(submit, tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["accepted"], done.stdout + done.stderr
    other = tmp_path / "other"  # a host that launches subagents, on a clone of its own
    subprocess.run(["git", "clone", "-q", root, str(other)], check=True)
    code, step = cli(capsys, "next-step", "--root", str(other), *NEXT)
    assert code == 0
    step = past_context_json(other, step)
    merge = next(c for c in _code_blocks(Path(step["prompt_path"]).read_text()) if "merge-and-ingest" in c)
    status = next(c for c in _code_blocks(Path(step["prompt_path"]).read_text()) if "plan-status" in c)
    assert "FAILURES" not in merge and "ID,ID" not in status
    assert _bash(status, tmp_path).returncode == 0
    done = _bash(merge, tmp_path)  # nothing submitted, nothing reported: every packet counts as failed
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["packets_failed"] == len(step["packet_ids"])
