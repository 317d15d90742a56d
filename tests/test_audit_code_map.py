"""The "Coming from audit-code" page names only verbs and flags that exist, the command-line page lists every
verb, and the original's spellings that are kept still work."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from audit_mcp.surfaces.cli import build_parser
from tests.conftest import ScriptedReviewer
from tests.driving import cli

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _section() -> str:
    return (DOCS / "coming-from-audit-code.md").read_text(encoding="utf-8")


def _verbs() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _ours(section: str) -> list[str]:
    """The right-hand cells of the section's tables: what audit-mcp offers."""
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| audit-code")]
    return [re.split(r"(?<!\\)\|", row)[2] for row in rows if not set(row) <= {"|", "-", " "}]


def test_every_verb_and_flag_the_mapping_names_exists() -> None:
    verbs = _verbs()
    cells = _ours(_section())
    assert len(cells) >= 25
    named = {v for cell in cells for v in re.findall(r"audit-mcp ([a-z-]+)", cell)}
    assert named and named <= set(verbs), named - set(verbs)
    flags = {f for cell in cells for f in re.findall(r"(?<![\w-])(--[a-z][a-z-]*[a-z])(?![-*\w])", cell)}
    known = {opt for p in verbs.values() for action in p._actions for opt in action.option_strings}
    assert flags and flags <= known, flags - known
    every_verb = set(verbs)
    listed = set(re.findall(r"^- `audit-mcp ([a-z-]+)", (DOCS / "command-line.md").read_text(encoding="utf-8"), re.M))
    assert every_verb <= listed, f"verbs docs/command-line.md misses: {every_verb - listed}"


def test_the_originals_batch_results_spelling_ingests_a_folder(
    repo: Path, tmp_path: Path, reviewer: ScriptedReviewer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, step = cli(capsys, "next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true")
    assert code == 0 and step["step_kind"] == "dispatch_review"
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    batch = tmp_path / "batch"
    batch.mkdir()
    for packet in plan["packets"]:
        (batch / f"{packet['packet_id']}.json").write_text(json.dumps(reviewer.results(packet)))
    code, out = cli(capsys, "ingest-results", "--root", str(repo), "--batch-results", str(batch))
    assert code == 0 and out["accepted"] == len(plan["packets"]) and out["refused"] == 0, out
