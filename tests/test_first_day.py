"""A stranger's first day: every option applies or is refused with the command that would apply it, printed
commands work as pasted, the CI path survives partial runs, reports keep their history, and errors say what
to do."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from mcp import Client

from audit_mcp.surfaces.cli import exits, main
from audit_mcp.surfaces.server import build_server
from audit_mcp.usecases.service import AuditService
from tests.driving import cli, finish, opinions, past_context_json
from tests.test_headless import TEMPLATE
from tests.workflows import workflow_steps

PROJECT = Path(__file__).resolve().parent.parent

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


@pytest.mark.parametrize("ending", ["partial", "blocked"])
def test_the_actions_example_uploads_sarif_after_a_partial_or_blocked_run(
    repo: Path, tmp_path: Path, ending: str
) -> None:
    """The workflow's steps run in order (the install step aside, Claude Code replaced by the scripted worker):
    after exit 3 (partial) or 4 (blocked) the SARIF it uploads is there and valid."""
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    outputs = tmp_path / "github-output"
    env = {**os.environ, "GITHUB_OUTPUT": str(outputs), "SCRIPTED_WORKER_STATE": str(tmp_path / "workers")}
    if ending == "blocked":
        env["SCRIPTED_WORKER_AUTH"] = "1"
    (tmp_path / "workers").mkdir()
    ran = []
    for name, step_env, script in workflow_steps(PROJECT / "docs" / "github-actions-audit.yml"):
        if name.startswith("Install") or script.strip() == "exit 1":
            continue
        script = script.replace("${{ runner.temp }}", str(temp))
        script = re.sub(r"--worker '.*'", lambda _: f"--worker {shlex.quote(TEMPLATE)}", script)
        if " run " in script and ending == "partial":
            script = script.replace("audit-mcp run ", "audit-mcp run --max-runs 1 ", 1)
        values = {k: v.replace("${{ runner.temp }}", str(temp)) for k, v in step_env.items() if "secrets." not in v}
        done = subprocess.run(["bash", "-c", script], cwd=repo, env={**env, **values}, capture_output=True, text=True)
        assert done.returncode == 0, (name, done.stdout, done.stderr)
        ran.append(name)
    assert len(ran) == 2  # the audit, then the SARIF
    assert outputs.read_text().strip() == ("code=3" if ending == "partial" else "code=4")
    sarif = json.loads((temp / "audit-mcp" / "upload.sarif").read_text())
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["invocations"][0]["executionSuccessful"] is False
    assert (temp / "audit-mcp" / "report" / "report.md").is_file()  # the artifact step's folder exists


def test_reports_keep_their_history_through_abandon_and_report_audit_n(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = AuditService(repo)
    assert finish(service, service.next_step({"can_dispatch_subagents": True})).step_kind == "present_report"
    final = service.report("md")
    assert "Provisional" not in final
    root = str(repo)
    with (repo / "app" / "db.py").open("a") as changed:  # a change for the next audit to review
        changed.write("# reviewed again\n")
    code, step = cli(capsys, "next-step", "--root", root, "--new-audit", *NEXT)
    assert code == 0 and step["step_kind"] == "dispatch_review"
    code, _ = cli(capsys, "abandon", "--root", root, "--reason", "wrong branch")
    assert code == 0
    code, text = cli(capsys, "report", "--root", root)
    err = capsys.readouterr().err
    assert code == 0 and text == final  # the last complete report, not the abandoned audit's
    assert (repo / ".audit-mcp" / "report" / "report.md").read_text() == final
    code, abandoned = cli(capsys, "report", "--root", root, "--audit", "2")
    assert code == 0 and "Provisional, abandoned" in abandoned and "wrong branch" in abandoned
    assert "still running" not in abandoned
    code, first = cli(capsys, "report", "--root", root, "--audit", "1", "--format", "json")
    assert code == 0 and first["audit"]["audit_id"] == 1 and first["provisional"] is False
    assert (repo / ".audit-mcp" / "report" / "audits" / "1" / "report.md").read_text() == final
    code, _ = cli(capsys, "report", "--root", root, "--audit", "7")
    assert code != 0
    del err


@pytest.mark.anyio
async def test_every_mcp_error_says_what_was_wrong_and_what_to_do(repo: Path) -> None:
    from mcp import MCPError

    async with Client(build_server(repo)) as client:
        wide = await client.call_tool(
            "next_step", {"host_can_dispatch_subagents": True, "host_max_active_subagents": 100}
        )
        assert wide.is_error
        text = wide.content[0].text  # type: ignore[union-attr]
        assert "`host_max_active_subagents` is 100; it must be at most 64" in text and "Call next_step again" in text
        assert "pydantic" not in text and "https://" not in text
        kind = await client.call_tool("next_step", {"host_can_dispatch_subagents": "sometimes"})
        assert "`host_can_dispatch_subagents` is 'sometimes'; give true or false" in kind.content[0].text  # type: ignore[union-attr]
        with pytest.raises(MCPError) as nothing:
            await client.read_resource("audit://report")
        assert "call next_step there first" in str(nothing.value) and "Internal" not in str(nothing.value)
        assert not (await client.call_tool("next_step", {"host_can_dispatch_subagents": True})).is_error
        with pytest.raises(MCPError) as unknown:
            await client.get_prompt("reproduce_finding", {"finding": "F999"})
        assert "Internal" not in str(unknown.value) and "F999" in str(unknown.value)
        with pytest.raises(MCPError) as missing:
            await client.get_prompt("reproduce_finding", {})
        assert "`finding` (required)" in str(missing.value) and "Internal" not in str(missing.value)
        with pytest.raises(MCPError) as plan:
            await client.read_resource("audit://runs/A9-R9-000000/dispatch-plan")
        assert "A9-R9-000000" in str(plan.value) and "Internal" not in str(plan.value)


MODEL_VISIBLE_LIMIT = 15_000


@pytest.mark.anyio
async def test_what_a_host_reads_of_the_tools_is_lean_dedented_and_its_examples_are_real(repo: Path) -> None:
    async with Client(build_server(repo)) as client:
        tools = (await client.list_tools()).tools
        step = await client.call_tool("next_step", {"host_can_dispatch_subagents": True})
    visible = sum(len(t.name) + len(t.description or "") + len(json.dumps(t.input_schema)) for t in tools)
    assert visible <= MODEL_VISIBLE_LIMIT, f"the model-visible tool list is {visible} characters"
    for tool in tools:
        assert not any(line.startswith(" ") for line in (tool.description or "").splitlines()), tool.name
        assert "$ref" not in json.dumps(tool.input_schema) or "$defs" in tool.input_schema, tool.name
    run_id = step.structured_content["run_id"]  # type: ignore[index]
    described = {t.name: t.input_schema for t in tools}["submit_packet"]["properties"]
    example_run = re.search(r"e\.g\. (\S+)\)", described["run_id"]["description"]).group(1)  # type: ignore[union-attr]
    example_packet = re.search(r"e\.g\. (\S+)\)", described["packet_id"]["description"]).group(1)  # type: ignore[union-attr]
    shape = re.compile(r"A\d+-R\d+-[0-9a-f]{6}")
    assert shape.fullmatch(run_id) and shape.fullmatch(example_run)
    assert re.fullmatch(r"A\d+-R\d+-[0-9a-f]{6}-P\d+", example_packet)


def test_explain_task_file_lists_a_files_tasks_with_their_state(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(repo)
    code, step = cli(capsys, "next-step", "--root", root, *NEXT)
    past_context_json(repo, step)
    code, listed = cli(capsys, "explain-task", "--root", root, "--file", "app/db.py")
    assert code == 0 and listed["file"] == "app/db.py" and listed["scope"] == "review"
    assert listed["tasks"] and {t["state"] for t in listed["tasks"]} <= {"assigned", "pending"}
    assert sum(listed["by_state"].values()) == len(listed["tasks"])
    code, _ = cli(capsys, "explain-task", "--root", root, "--file", "./app/db.py")
    assert code == 0
    code, skipped = cli(capsys, "explain-task", "--root", root, "--file", "README.md")
    assert code == 0 and skipped["scope"] == "skipped" and skipped["tasks"] == []
    assert main(["explain-task", "--root", root, "--file", "nowhere.py"]) == exits.EXIT_ERROR
    assert "not in audit 1's manifest" in capsys.readouterr().err
    assert main(["explain-task", "--root", root]) == exits.EXIT_USAGE


@pytest.mark.anyio
async def test_a_copied_artifacts_folder_never_makes_two_roots_share_a_run_id(repo: Path, tmp_path: Path) -> None:
    import shutil

    first = AuditService(repo).next_step({"can_dispatch_subagents": True})
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, symlinks=True)  # with its .audit-mcp, mid-run
    async with Client(build_server(repo, allowed_roots=[copy])) as client:
        mine = await client.call_tool("next_step", {"root": str(repo)})
        theirs = await client.call_tool("next_step", {"root": str(copy), "host_can_dispatch_subagents": True})
    a, b = mine.structured_content, theirs.structured_content
    assert a is not None and b is not None and a["run_id"] == first.run_id
    assert b["run_id"] != a["run_id"] and b["run_id"].split("-")[2] != a["run_id"].split("-")[2]
    assert any("copied or moved here" in n for n in b["notices"])
