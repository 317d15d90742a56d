"""The generated reference pages are what the code produces now, and they cover what they claim to."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from audit_mcp.core.config import USER_ONLY_KEYS, load_config
from audit_mcp.core.errors import ConfigError
from audit_mcp.surfaces import reference
from audit_mcp.surfaces.cli import build_parser

PROJECT = Path(__file__).resolve().parent.parent
FOLDER = PROJECT / "docs" / "reference"


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return reference.pages()


@pytest.mark.parametrize("name", reference.PAGES)
def test_each_reference_page_is_what_the_code_produces(name: str, pages: dict[str, str]) -> None:
    written = (FOLDER / name).read_text(encoding="utf-8") if (FOLDER / name).is_file() else ""
    assert written == pages[name], (
        f"docs/reference/{name} differs from the code; run `{reference.REGENERATE}` and commit the result"
    )


def test_the_cli_page_names_every_verb_and_every_flag(pages: dict[str, str]) -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    page = pages["cli.md"]
    for name, verb in sub.choices.items():
        assert f"## `{name}`" in page
        for action in verb._actions:
            for flag in action.option_strings if action.dest != "help" else ():
                assert f"`{flag}`" in page, f"{name} {flag}"


def test_every_environment_variable_the_package_reads_is_in_the_config_reference(pages: dict[str, str]) -> None:
    named = set()
    for path in (PROJECT / "audit_mcp").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                named |= set(re.findall(r"^AUDIT_MCP_[A-Z_]+$", node.value))
    assert len(named) >= 15
    missing = {name for name in named if f"`{name}`" not in pages["config.md"]}
    assert not missing, missing


@pytest.mark.parametrize("key", USER_ONLY_KEYS)
def test_every_key_the_reference_says_a_repository_may_not_set_is_refused(key: str, tmp_path: Path) -> None:
    toml = {
        "store": 'store = "postgresql://db/audit"\n',
        "audit_name": 'audit_name = "x"\n',
        "[shared]": "[shared]\nlearned = true\n",
        "[scheduler] half_life_hours": "[scheduler]\nhalf_life_hours = 2\n",
        "[scheduler] probe": '[scheduler]\nprobe = "auto"\n',
        "[prices]": "[prices]\ninput = 0.0\noutput = 0.0\n",
    }[key]
    (tmp_path / ".audit-mcp.toml").write_text(toml)
    with pytest.raises(ConfigError, match="refused"):
        load_config(tmp_path)
    assert f"`{key}`" in reference.configuration.page()


def test_a_config_field_without_a_description_stops_the_generator() -> None:
    from pydantic import BaseModel

    class Bare(BaseModel):
        knob: int = 1

    with pytest.raises(ValueError, match=r"Bare\.knob has no description"):
        reference.configuration._config_rows(Bare)


def test_check_names_a_stale_page_and_writing_makes_it_current(tmp_path: Path) -> None:
    assert reference.main(["--out", str(tmp_path), "--check"]) == 1
    assert reference.main(["--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(reference.PAGES)
    assert reference.main(["--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "cli.md").write_text("# stale\n")
    assert reference.main(["--out", str(tmp_path), "--check"]) == 1


def test_the_changelog_names_every_tool_resource_and_prompt_the_server_lists() -> None:
    listing = reference.mcp_surface.mcp_listing()
    changelog = (PROJECT / "CHANGELOG.md").read_text(encoding="utf-8")
    names = [t.name for t in listing["tools"]] + [p.name for p in listing["prompts"]]
    names += [str(r.uri) for r in listing["resources"]]
    missing = [name for name in names if f"`{name}`" not in changelog]
    assert not missing, f"CHANGELOG.md does not name {missing}"
