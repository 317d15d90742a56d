"""The rendered Markdown report of the planted fixture, compared with a reviewed snapshot.

Run with AUDIT_MCP_UPDATE_SNAPSHOTS=1 to rewrite the snapshot after an intended change, then read the diff.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

from audit_mcp.usecases.service import AuditService
from tests.conftest import FIXTURES, ScriptedReviewer
from tests.driving import drive, judging_with_second_lens

SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "report_planted_app.md"


def _normalise(markdown: str, repo: Path) -> str:
    """Only what differs between machines and commits: the git head, the manifest digest, the root path, the
    run ids' tag (it names the artifacts directory) and the token counts of prompts that name them."""
    text = re.sub(r"Snapshot: [0-9a-f]{12}", "Snapshot: <git-head>", markdown)
    text = re.sub(r"manifest [0-9a-f]{12}", "manifest <digest>", text)
    text = re.sub(r"\b(A\d+-R\d+)-[0-9a-f]{6}\b", r"\1-<tag>", text)  # run ids carry their directory's tag
    # The forecast's tokens count the packet prompts, which name the root and the artifacts directory.
    text = re.sub(r"^- Tokens: .*$", "- Tokens: <counted from prompts that name the root>", text, flags=re.M)
    return text.replace(str(repo), "<root>")


def test_the_markdown_report_of_the_fixture_matches_its_snapshot(repo: Path, reviewer: ScriptedReviewer) -> None:
    service = AuditService(repo, clock=lambda: datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    drive(service, judging_with_second_lens(reviewer), analyzer_sarif=[FIXTURES / "planted_app.bandit.sarif"])
    rendered = _normalise(service.report("md"), repo)
    if os.environ.get("AUDIT_MCP_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(rendered)
    assert rendered == SNAPSHOT.read_text(), "the report changed; if intended, rerun with AUDIT_MCP_UPDATE_SNAPSHOTS=1"
