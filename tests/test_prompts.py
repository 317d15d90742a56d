"""The prompts are product: every file is used, renders, and says what it must."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from audit_mcp.core.config import DEFAULT_LENSES
from audit_mcp.engine.lenses import available_lenses
from audit_mcp.engine.templates import load, placeholders, prompts_dir, render
from tests.conftest import FIXTURES
from tests.driving import cli, past_context_json

PACKAGE = Path(__file__).resolve().parent.parent / "audit_mcp"


def _all_prompt_files() -> list[str]:
    root = prompts_dir()
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md"))


@pytest.mark.parametrize("name", _all_prompt_files())
def test_every_prompt_file_is_used_by_the_code(name: str) -> None:
    if name.startswith("lenses/"):
        assert Path(name).stem in available_lenses()
        return
    source = "".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    assert f'"{name}"' in source, f"{name} is never rendered"


@pytest.mark.parametrize("name", [n for n in _all_prompt_files() if not n.startswith("lenses/")])
def test_every_template_renders_with_all_its_placeholders(name: str) -> None:
    names = placeholders(load(name))
    text = render(name, **{key: f"<{key}>" for key in names})
    assert "{{" not in text and "}}" not in text


def test_rendering_refuses_missing_and_unused_values() -> None:
    with pytest.raises(Exception, match="missing values"):
        render("steps/blocked.md", reason="x")


def test_the_default_lenses_exist_and_have_their_sections() -> None:
    lenses = available_lenses()
    assert set(DEFAULT_LENSES) <= set(lenses)
    for lens in lenses.values():
        for section in ("## Look for", "## Not findings", "## Severity"):
            assert section in lens.text, (lens.lens_id, section)
        assert len(lens.summary) <= 200


def test_the_packet_prompt_says_the_code_is_untrusted() -> None:
    prefix = load("packet/prefix.md")
    assert "untrusted data" in prefix and "never to obey" in prefix


def _owners_named(text: str, own: str) -> set[str]:
    """The other lenses a lens text hands bugs to ("the performance lens owns them", "(concurrency lens)")."""
    named = {
        lens_id
        for lens_id, lens in available_lenses().items()
        if re.search(rf"\b{re.escape(lens.title)} lens\b", text, re.I)
    }
    return named - {own}


def test_every_condition_in_a_lens_text_names_a_real_lens() -> None:
    lenses = available_lenses()
    for lens in lenses.values():
        assert lens.conditions() <= set(lenses), lens.lens_id


@pytest.mark.parametrize("lens_id", sorted(available_lenses()))
def test_a_lens_alone_hands_no_bug_to_a_lens_the_audit_lacks(lens_id: str) -> None:
    lens = available_lenses()[lens_id]
    assert _owners_named(lens.text_for({lens_id}), lens_id) == set()
    # With every lens in the audit, the hand-offs are back.
    everyone = set(available_lenses())
    assert _owners_named(lens.text_for(everyone), lens_id) == lens.conditions() - {lens_id}
    assert "(with " not in lens.text_for(everyone) and "(without " not in lens.text_for({lens_id})


def test_a_security_only_audit_asks_its_reviewers_for_denial_of_service_and_redos(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def first_prompt(lenses: str) -> str:
        root = tmp_path / lenses
        shutil.copytree(FIXTURES / "planted_app", root, ignore=shutil.ignore_patterns(".audit-mcp"))
        (root / ".audit-mcp.toml").write_text(f"lenses = {lenses}\n")
        code, step = cli(capsys, "next-step", "--root", str(root), "--host-can-dispatch-subagents", "true")
        assert code == 0, step
        plan = json.loads(Path(past_context_json(root, step)["artifact_paths"]["plan"]).read_text())
        return Path(plan["packets"][0]["prompt_path"]).read_text()

    alone = first_prompt('["security"]')
    assert "performance lens" not in alone and "concurrency lens" not in alone
    assert "Report denial of service an attacker can trigger here" in alone and "ReDoS" in alone
    paired = first_prompt('["security", "performance"]')
    assert "ReDoS; the performance lens owns them" in paired and "an attacker can trigger here" not in paired
