"""The prompts are product: every file is used, renders, and says what it must."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit_mcp.core.config import DEFAULT_LENSES
from audit_mcp.engine.lenses import available_lenses
from audit_mcp.engine.templates import load, placeholders, prompts_dir, render

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
