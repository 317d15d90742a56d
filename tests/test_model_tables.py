"""Limits per model: ``[model."<name>"]`` tables beside the ``[model]`` table, their precedence, and clear
errors for what they may not hold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from audit_mcp.surfaces.cli import main
from audit_mcp.surfaces.cli.exits import EXIT_BLOCKED
from tests.driving import cli

CONFIG = """
[model]
requests_per_minute = 40
output_tokens_per_minute = 9000

[model."claude-sonnet-4-6"]
requests_per_minute = 1000
input_tokens_per_minute = 450000

[model.gpt-5]
context_tokens = 200000
"""


def _limits(capsys: pytest.CaptureFixture[str], repo: Path, model: str) -> dict[str, Any]:
    code, quota = cli(capsys, "quota", "--root", str(repo), "--host-model", model)
    assert code == 0, quota
    return {key: (v["value"], v["source"], v["confidence"]) for key, v in quota["limits"].items()}


def test_a_models_own_table_wins_over_the_model_table_which_wins_over_the_built_in_table(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / ".audit-mcp.toml").write_text(CONFIG)
    sonnet = _limits(capsys, repo, "claude-sonnet-4-6")
    assert sonnet["requests_per_minute"] == (1000, 'session config [model."claude-sonnet-4-6"]', "medium")
    assert sonnet["input_tokens_per_minute"] == (450_000, 'session config [model."claude-sonnet-4-6"]', "medium")
    assert sonnet["output_tokens_per_minute"] == (9000, "session config [model]", "medium")
    assert sonnet["context_tokens"][1].startswith("known-model table")
    haiku = _limits(capsys, repo, "claude-haiku-4-5")
    assert haiku["requests_per_minute"] == (40, "session config [model]", "medium")
    assert haiku["input_tokens_per_minute"][2] == "low"
    # A table named for a prefix covers the models whose names start with it; the longest name wins.
    mini = _limits(capsys, repo, "gpt-5-mini")
    assert mini["context_tokens"] == (200_000, 'session config [model."gpt-5"]', "medium")


def test_the_environment_wins_over_every_table(
    repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / ".audit-mcp.toml").write_text(CONFIG)
    monkeypatch.setenv("AUDIT_MCP_RPM", "7")
    sonnet = _limits(capsys, repo, "claude-sonnet-4-6")
    assert sonnet["requests_per_minute"] == (7, "environment AUDIT_MCP_RPM", "medium")
    assert sonnet["input_tokens_per_minute"][0] == 450_000


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        ('[model."claude-x"]\ncontext_tokens = 10\n', '[model."claude-x"] context_tokens: Input should be greater'),
        ('[model."claude-x"]\nrpm = 10\n', '[model."claude-x"] rpm: not a limit; a model\'s table takes'),
        ("[model]\nclaude = 5\n", "[model] claude: not a limit"),
        ('[model."claude-x".deeper]\nrequests_per_minute = 5\n', '[model."claude-x"] deeper: not a limit'),
    ],
)
def test_what_a_table_may_not_hold_is_named_with_its_table(
    repo: Path, capsys: pytest.CaptureFixture[str], toml: str, said: str
) -> None:
    (repo / ".audit-mcp.toml").write_text(toml)
    assert main(["quota", "--root", str(repo), "--host-model", "claude-x"]) == 1
    message = capsys.readouterr().err
    assert said in message and "Fix them" in message, message
    code, step = cli(capsys, "next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true")
    assert code == EXIT_BLOCKED and step["step_kind"] == "blocked" and said in step["reason"], step
