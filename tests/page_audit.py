"""An audit of the planted fixture for the page's tests: a file with a hostile name beside the fixture's own,
and one planted finding reported under a hostile title (markup, Markdown, terminal escapes)."""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.findings.page import DATA_ELEMENT_ID
from audit_mcp.surfaces.scripted import AnswerKeyReviewer
from audit_mcp.usecases.service import AuditService
from tests.conftest import FIXTURES, git

HOSTILE_TITLE = (
    "<script>alert(1)</script><img src=x onerror=alert(2)> **bold** _em_ [link](https://evil.example) "
    "# not a heading `code` \x1b[31mred\x1b[0m \x1b]0;title\x07 &amp; </script>"
)
HOSTILE_FILE = "web/<img src=x onerror=alert(3)>\u202eevil.js"
CAPS = {"can_dispatch_subagents": True, "max_active_subagents": 4}


@contextmanager
def isolated(where: Path) -> Iterator[None]:
    """What the autouse fixture of conftest gives each test, for fixtures that outlive one test: a learned
    state of their own, no provider probed, the SQLite store."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUDIT_MCP_STATE_DIR", str(where / "learned-state"))
        patch.setenv("AUDIT_MCP_PROBE", "never")
        patch.delenv("AUDIT_MCP_STORE", raising=False)
        patch.delenv("AUDIT_MCP_AUDIT_NAME", raising=False)
        yield


def hostile_repo(parent: Path) -> Path:
    """The planted fixture as a git repository, with a file whose name is markup and a bidirectional override."""
    root = parent / "planted_app"
    shutil.copytree(FIXTURES / "planted_app", root, ignore=shutil.ignore_patterns(".audit-mcp"))
    (root / HOSTILE_FILE).write_text("export function evil() {\n  return 1;\n}\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "fixture")
    return root


def hostile_reviewer() -> AnswerKeyReviewer:
    """The answer key's reviewer, decoys and all (so some findings are refuted), with the first planted
    defect reported under ``HOSTILE_TITLE``."""
    key: dict[str, Any] = json.loads((FIXTURES / "planted_app.answer-key.json").read_text())
    key = copy.deepcopy(key)
    key["issues"][0]["title"] = HOSTILE_TITLE
    return AnswerKeyReviewer(key)


def answer_run(service: AuditService, reviewer: AnswerKeyReviewer, step: Any) -> None:
    """Submit every packet of the step's run as the reviewer answers it, then merge the run."""
    plan: Mapping[str, Any] = json.loads(service.plan_path(step.run_id).read_text(encoding="utf-8"))
    for packet in plan["packets"]:
        receipt = service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet))
        assert receipt.accepted, receipt.errors
    service.merge_and_ingest(plan["run_id"])


def audit_to_the_end(root: Path) -> AuditService:
    service = AuditService(root)
    reviewer = hostile_reviewer()
    step = service.next_step(CAPS)
    for _ in range(10):
        if step.step_kind != "dispatch_review":
            break
        answer_run(service, reviewer, step)
        step = service.next_step()
    assert step.step_kind == "present_report", step
    return service


def embedded(page: str) -> dict[str, Any]:
    """The JSON block of a page, read as the page's script reads it."""
    start = page.index(f'<script type="application/json" id="{DATA_ELEMENT_ID}">')
    text = page[page.index(">", start) + 1 : page.index("</script>", start)]
    doc: dict[str, Any] = json.loads(text)
    return doc
