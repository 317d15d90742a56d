"""The README and the documentation work as written: every JSON/TOML block parses (host setups name a real
command, config examples load, result examples fit the submission models and quote the fixture's real lines),
every command names a real verb, the README stays short and reaches what a reader needs, and every relative
link of the README and the top-level documents points at a file that exists."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from audit_mcp.core.config import load_config
from audit_mcp.engine.checks import locate_evidence
from audit_mcp.engine.inputs import Finding, RelatedLocation, TaskResult
from audit_mcp.surfaces.cli import build_parser

PROJECT = Path(__file__).resolve().parent.parent
README = (PROJECT / "README.md").read_text()
PAGES = {
    p.relative_to(PROJECT).as_posix(): p.read_text()
    for p in sorted((PROJECT / "docs").rglob("*.md"))
    if "reference" not in p.relative_to(PROJECT / "docs").parts
}
_BLOCK = re.compile(r"^( *)```(json|toml|sh|yaml)\n(.*?)^\1```", re.S | re.M)
DEFAULT_URL = "http://127.0.0.1:8765/mcp"
FIXTURE = PROJECT / "fixtures" / "planted_app"


def blocks(text: str) -> list[tuple[str, str]]:
    return [
        (m.group(2), "\n".join(line[len(m.group(1)) :] for line in m.group(3).splitlines()))
        for m in _BLOCK.finditer(text)
    ]


BLOCKS = [(doc, lang, text) for doc, body in {"README.md": README, **PAGES}.items() for lang, text in blocks(body)]
DATA = [b for b in BLOCKS if b[1] in ("json", "toml")]


def scripts() -> dict[str, str]:
    return tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]["scripts"]


def check_command(argv: list[str]) -> None:
    """`audit-mcp <verb> ...` names the console script and parses with the real CLI parser."""
    assert argv[0] in scripts(), f"{argv[0]} is not a console script of this package"
    build_parser().parse_args(argv[1:])  # exits (SystemExit) on an unknown verb or flag


def servers(doc: dict[str, Any]) -> dict[str, Any]:
    return doc.get("mcpServers") or doc.get("servers") or doc.get("mcp_servers") or {}


def unknown_keys(value: Any, model: type[BaseModel]) -> list[str]:
    """Keys of ``value`` (and of its findings and related locations) that ``model`` does not know: the models
    ignore unknown keys, so a misspelt one would pass validation silently."""
    known = set(model.model_fields)
    found = [key for key in value if key not in known]
    nested: dict[str, type[BaseModel]] = {"findings": Finding, "related_locations": RelatedLocation}
    for key, inner in nested.items():
        for item in value.get(key) or ():
            found += unknown_keys(item, inner)
    return found


def check_result(result: dict[str, Any]) -> None:
    """A result example is a valid ``TaskResult`` whose findings quote the bundled fixture at their lines."""
    TaskResult.model_validate(result)
    assert not unknown_keys(result, TaskResult)
    for finding in result.get("findings") or ():
        lines = (FIXTURE / finding["file"]).read_text().splitlines()
        where = (finding["start_line"], finding["end_line"])
        assert where in locate_evidence(lines, finding["evidence"]), f"the evidence is not at {where}"


@pytest.mark.parametrize(("doc", "lang", "text"), DATA, ids=[f"{b[0]}-{b[1]}-{i}" for i, b in enumerate(DATA)])
def test_every_json_and_toml_snippet_parses_and_names_a_real_command(
    doc: str, lang: str, text: str, tmp_path: Path
) -> None:
    value = json.loads(text) if lang == "json" else tomllib.loads(text)
    if "task_id" in value:
        check_result(value)
        return
    hosts = servers(value)
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


def test_the_hosts_page_has_setups_for_every_host_and_transport() -> None:
    page = PAGES["docs/hosts.md"]
    parsed = [
        servers(json.loads(t) if lang == "json" else tomllib.loads(t)) for lang, t in blocks(page) if lang != "sh"
    ]
    stdio = [entry for doc in parsed for entry in doc.values() if "command" in entry]
    http = [entry for doc in parsed for entry in doc.values() if entry.get("url") == DEFAULT_URL]
    assert len(stdio) >= 4 and len(http) >= 4
    tokens = [e for e in http if "AUDIT_MCP_TOKEN" in json.dumps(e) or "input:" in json.dumps(e)]
    assert len(tokens) == len(http), "every HTTP setup sends the bearer token the server requires by default"
    for host in ("Claude Code", "Codex", "VS Code", "Cursor", "MCP Inspector"):
        assert f"**{host}**" in page
    assert "--session-idle-timeout" in page and "--max-sessions" in page and "--no-token" in page


def test_the_readme_sets_up_one_host_and_links_the_others() -> None:
    assert "claude mcp add audit-mcp -- audit-mcp serve --root ." in README
    assert "(docs/hosts.md)" in README


def test_every_shell_line_runs_a_real_verb() -> None:
    lines = [line for _, lang, text in BLOCKS if lang == "sh" for line in text.replace("\\\n", " ").splitlines()]
    checked = 0
    for line in lines:
        for part in re.split(r"&&|\|\|", line):
            words = shlex.split(part.strip())
            if "--" in words and words[0] == "claude":
                words = words[words.index("--") + 1 :]
            if words and words[0] == "audit-mcp":
                check_command(words)
                checked += 1
    assert checked >= 10


@pytest.mark.parametrize("name", ["github-actions-audit.yml", "github-actions-pr.yml"])
def test_each_documented_workflow_is_the_shipped_file_and_installs_nothing_unpublished(name: str) -> None:
    workflow = (PROJECT / "docs" / name).read_text()
    embedded = [text.rstrip("\n") for lang, text in blocks(PAGES["docs/headless.md"]) if lang == "yaml"]
    assert workflow.rstrip("\n") in embedded, f"docs/headless.md must embed docs/{name} as it is"
    run_line = next(line.strip() for line in workflow.splitlines() if line.strip().startswith("audit-mcp run "))
    check_command(shlex.split(run_line))
    assert "{prompt_path}" in run_line and "--artifacts-dir" in run_line
    assert "security-events: write" in workflow
    installs = re.findall(r'pip install ("[^"]+")', workflow)
    assert installs == ['"git+${{ vars.AUDIT_MCP_REPO }}@${AUDIT_MCP_REF}"'], installs  # its source, pinned


def test_the_readme_is_short_and_a_reader_reaches_references_and_a_result_within_two_links() -> None:
    assert len(README.splitlines()) <= 250
    links = set(re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README))
    assert {"docs/reference/cli.md", "docs/reference/config.md", "docs/reference/mcp.md"} <= links
    assert any(lang == "json" and '"task_id"' in text for doc, lang, text in BLOCKS if doc == "README.md")
    for heading in ("## Quickstart", "## Words used here"):
        assert heading in README
    for word in ("audit", "run", "packet", "wave", "cell", "lens", "obligation"):
        assert f"\n| {word} |" in README, f"the glossary misses {word!r}"


@pytest.mark.parametrize("doc", ["README.md", "BENCHMARKS.md", "SECURITY.md", "CHANGELOG.md"])
def test_every_relative_link_of_a_top_level_document_points_at_a_file(doc: str) -> None:
    text = (PROJECT / doc).read_text()
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (PROJECT / target).exists(), f"{doc} links {target}, which does not exist"


def test_benchmarks_md_opens_with_the_current_figures_the_docs_show() -> None:
    top = (PROJECT / "BENCHMARKS.md").read_text()
    head = top.split("## Current figures", 1)[1].split("\n## ", 1)[0]
    table = [line for line in head.splitlines() if line.startswith("|")]
    assert table[0].split("|")[1:-1] == [
        " what ",
        " command ",
        " machine ",
        " figure ",
        " baseline, measured side by side ",
        " ratio ",
        " date ",
    ]
    assert len(table) >= 10
    page = PAGES["docs/benchmarks/index.md"].split("## Current figures", 1)[1].split("\n## ", 1)[0]
    assert [line for line in page.splitlines() if line.startswith("|")] == table
    assert next(line for line in top.splitlines() if line.startswith("|")) == table[0]  # the first table
