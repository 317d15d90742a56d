"""The README's snippets work: every JSON/TOML block parses, and every command it names exists."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.core.config import load_config
from audit_mcp.surfaces.cli import build_parser

PROJECT = Path(__file__).resolve().parent.parent
README = (PROJECT / "README.md").read_text()
_BLOCK = re.compile(r"^( *)```(json|toml|sh|yaml)\n(.*?)^\1```", re.S | re.M)
BLOCKS = [
    (m.group(2), "\n".join(line[len(m.group(1)) :] for line in m.group(3).splitlines()))
    for m in _BLOCK.finditer(README)
]
DEFAULT_URL = "http://127.0.0.1:8765/mcp"


def scripts() -> dict[str, str]:
    return tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]["scripts"]


def check_command(argv: list[str]) -> None:
    """`audit-mcp <verb> ...` names the console script and parses with the real CLI parser."""
    assert argv[0] in scripts(), f"{argv[0]} is not a console script of this package"
    build_parser().parse_args(argv[1:])  # exits (SystemExit) on an unknown verb or flag


def servers(doc: dict[str, Any]) -> dict[str, Any]:
    return doc.get("mcpServers") or doc.get("servers") or doc.get("mcp_servers") or {}


@pytest.mark.parametrize(
    ("lang", "text"),
    [b for b in BLOCKS if b[0] in ("json", "toml")],
    ids=[f"{b[0]}-{i}" for i, b in enumerate(BLOCKS) if b[0] in ("json", "toml")],
)
def test_every_json_and_toml_snippet_parses_and_names_a_real_command(lang: str, text: str, tmp_path: Path) -> None:
    doc = json.loads(text) if lang == "json" else tomllib.loads(text)
    hosts = servers(doc)
    if not hosts:
        config = tmp_path / "audit.toml"
        config.write_text(text)
        load_config(tmp_path, config)  # the session config example is valid as written
        return
    for name, entry in hosts.items():
        assert name == "audit-mcp"
        if "url" in entry:
            assert entry["url"] == DEFAULT_URL, "the URL must be what `serve --http` serves by default"
            assert entry.get("type", "http") == "http"
            continue
        check_command([entry["command"], *entry["args"]])
        assert entry["args"][0] == "serve" and "--root" in entry["args"]


def test_the_readme_has_host_setups_for_every_host_and_transport() -> None:
    parsed = [
        servers(json.loads(t) if lang == "json" else tomllib.loads(t)) for lang, t in BLOCKS if lang in ("json", "toml")
    ]
    stdio = [entry for doc in parsed for entry in doc.values() if "command" in entry]
    assert len(stdio) >= 4
    urls = [t for lang, t in BLOCKS if lang in ("json", "toml") and DEFAULT_URL in t]
    assert len(urls) >= 4
    for host in ("Claude Code", "Codex", "VS Code", "Cursor", "MCP Inspector"):
        assert f"**{host}**" in README


def test_every_shell_line_runs_a_real_verb() -> None:
    lines = [line for lang, text in BLOCKS if lang == "sh" for line in text.replace("\\\n", " ").splitlines()]
    checked = 0
    for line in lines:
        for part in re.split(r"&&|\|\|", line):
            words = shlex.split(part.strip())
            if "--" in words and words[0] == "claude":
                words = words[words.index("--") + 1 :]
            if words and words[0] == "audit-mcp":
                check_command(words)
                checked += 1
    assert checked >= 3


def test_the_documented_workflow_is_the_shipped_file_and_installs_nothing_unpublished() -> None:
    workflow = (PROJECT / "docs" / "github-actions-audit.yml").read_text()
    assert ("yaml", workflow.rstrip("\n")) in [(lang, text.rstrip("\n")) for lang, text in BLOCKS]
    run_line = next(line.strip() for line in workflow.splitlines() if line.strip().startswith("audit-mcp run "))
    check_command(shlex.split(run_line))
    assert "{prompt_path}" in run_line and "--artifacts-dir" in run_line
    assert "security-events: write" in workflow
    installs = re.findall(r'pip install ("[^"]+")', workflow)
    assert installs == ['"git+${{ vars.AUDIT_MCP_REPO }}@${AUDIT_MCP_REF}"'], installs  # its source, pinned
