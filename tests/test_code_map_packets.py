"""Packets hold both sides of a boundary: in four repositories (a Django-style app, an Express-style API in
TypeScript, a Go service, a Spring-style Java service) whose defect's check lives in one file and its bypass
in another, the packet that reviews the bypass also holds the check, or its map quotes the check's guarding
lines and says to check the two together. Driven through the command line, as a host would."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, git
from tests.driving import cli

_CONFIG = (
    'lenses = ["security"]\ncontext_pass = false\nverification_pass = false\n'
    # Small packets: a few files each, so that what travels together is the packer's choice.
    "max_packet_tokens = 9000\n"
)
_JAVA = "src/main/java/com/example/notes/"
CASES = {
    "django_shop": ("catalogue/views.py", "catalogue/permissions.py", "can_edit_product", "if user.is_staff:"),
    "express_api": (
        "src/routes/admin.ts",
        "src/middleware/auth.ts",
        "requireAdmin",
        'if (!req.user || req.user.role !== "admin") {',
    ),
    "go_service": ("internal/handlers/notes.go", "internal/auth/owner.go", "CanModify", "return note.OwnerID == user"),
    "java_service": (
        _JAVA + "web/NoteController.java",
        _JAVA + "security/AccessPolicy.java",
        "canModify",
        "if (user.id().isEmpty()) {",
    ),
}


def copy_fixture(name: str, tmp_path: Path) -> Path:
    repo = tmp_path / name
    shutil.copytree(FIXTURES / "codemap" / name, repo)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "fixture")
    return repo


def first_plan(repo: Path, capsys: pytest.CaptureFixture[str], config: str = _CONFIG) -> dict[str, Any]:
    cfg = repo.parent / f"{repo.name}.toml"
    cfg.write_text(config)
    code, step = cli(
        capsys, "next-step", "--root", str(repo), "--config", str(cfg), "--host-can-dispatch-subagents", "true"
    )
    assert code == 0 and step["step_kind"] == "dispatch_review", step
    plan: dict[str, Any] = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    return plan


def map_section(prompt: str) -> str:
    return prompt[prompt.index("## How these files connect") : prompt.index("## Analyzer leads")]


@pytest.mark.parametrize("fixture", sorted(CASES))
def test_the_packet_reviewing_a_bypass_holds_its_check_or_quotes_the_checks_guarding_lines(
    fixture: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bypass, check, name, guard = CASES[fixture]
    plan = first_plan(copy_fixture(fixture, tmp_path), capsys)
    assert len(plan["packets"]) > 1, "the repository fits one packet: nothing to choose"
    packet = next(p for p in plan["packets"] if bypass in {t["file"] for t in p["tasks"]})
    files = {t["file"] for t in packet["tasks"]}
    section = map_section(Path(packet["prompt_path"]).read_text())
    if check not in files:
        assert f"`{name}` in `{check}:" in section, section
        assert guard in section, section
        together = section[section.index("**Check these together:**") :]
        assert f"`{name}` (`{check}:" in together.split("\n\n")[0], section


def test_an_app_s_modules_travel_together_and_apps_it_has_no_tie_to_stay_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = first_plan(copy_fixture("django_shop", tmp_path), capsys, config=_CONFIG.replace("9000", "14000"))
    packed = [{t["file"] for t in p["tasks"]} for p in plan["packets"]]
    views = next(files for files in packed if "catalogue/views.py" in files)
    app = {"catalogue/forms.py", "catalogue/models.py", "catalogue/permissions.py", "catalogue/urls.py"}
    assert app <= views
    # Basket uses the catalogue's models (a tie); the address and review apps do not share this packet.
    assert not {f for f in views if f.startswith(("address/", "reviews/"))}


def test_the_context_packet_lists_the_routes_and_hubs_the_map_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = copy_fixture("django_shop", tmp_path)
    plan = first_plan(repo, capsys, config='lenses = ["security"]\n')
    assert plan["packet_kind"] == "context"
    prompt = Path(plan["packets"][0]["prompt_path"]).read_text()
    assert "route \\<int:pk>/delete/ (catalogue/urls.py:12): delete_product (line 31)" in prompt
    hubs = prompt[prompt.index("### Code map hubs") :]
    assert hubs.startswith("### Code map hubs") and "- `catalogue/models.py` is used by 6 file(s)" in hubs


def test_with_the_code_map_off_intake_maps_nothing_and_packets_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = first_plan(copy_fixture("go_service", tmp_path), capsys, config=_CONFIG + "code_map = false\n")
    # Dispatch writes the prompts of the first waves; those are enough to read.
    prompts = [Path(p["prompt_path"]).read_text() for p in plan["packets"] if Path(p["prompt_path"]).is_file()]
    assert prompts and all(
        "This audit runs without the code map (`code_map = false` in its config)" in map_section(text)
        for text in prompts
    )
