"""The page without a browser: its data block cannot close itself, its policy names the exact script and style
it carries, its map is data-driven (a new cell state is one legend entry), and the CLI and every merge write it."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pytest

from audit_mcp.findings.page import content_security_policy, data_block, render_page
from audit_mcp.findings.page_data import NO_CELL, STATE_STYLES, UNKNOWN_STATE_COLOUR, CellStates, coverage_map
from audit_mcp.store.records import FileRow
from audit_mcp.usecases.service import AuditService
from tests.driving import cli
from tests.page_audit import CAPS, answer_run, embedded, hostile_reviewer

HOSTILE = "</script><script>alert(1)</script><!-- \u2028\u2029 & <b> \udce9 é \x1b[2J"


def _cell(path: str, lens: str, state: str, start: int = 1, end: int = 10) -> CellStates:
    return (path, start, end, lens, state)


@pytest.mark.parametrize("text", [HOSTILE, "", "plain", "a\nb\tc"], ids=["hostile", "empty", "plain", "lines"])
def test_the_data_block_holds_no_markup_and_reads_back_the_same(text: str) -> None:
    doc = {"title": text, "nested": [{"path": text}], "n": 3}
    block = data_block(doc)
    assert not set(block) & {"<", ">", "&", "\u2028", "\u2029"} and block.isascii()
    assert json.loads(block) == doc
    page = render_page({"repo": {"name": text}, **doc})
    assert page.count("</script>") == 2 and page.count("<script") == 2 and "<!--" not in page
    assert embedded(page) == {"repo": {"name": text}, **doc}


def test_the_policy_names_the_one_script_and_style_the_page_carries() -> None:
    page = render_page({"repo": {"name": "r"}})
    script = re.search(r"<script>(.*?)</script>", page, re.S)
    style = re.search(r"<style>(.*?)</style>", page, re.S)
    assert script and style
    digest = {
        name: base64.b64encode(hashlib.sha256(found.group(1).encode()).digest()).decode()
        for name, found in (("script", script), ("style", style))
    }
    policy = content_security_policy()
    assert f"script-src 'sha256-{digest['script']}'" in policy and f"style-src 'sha256-{digest['style']}'" in policy
    assert "default-src 'none'" in policy and "connect-src 'none'" in policy
    assert "require-trusted-types-for 'script'" in policy and "unsafe" not in policy
    assert f'content="{policy}"' in page
    assert "connect-src 'self'" in content_security_policy(live=True)
    assert "frame-ancestors 'none'" in content_security_policy(live=True, header=True)
    for marker in ("</script", "<!--", "<script"):  # the script must not end (or open) an element in the page
        assert marker not in script.group(1).lower()


def test_the_map_codes_each_unit_by_lens_and_lists_a_new_state_as_one_more_entry() -> None:
    cells = [
        _cell("app/a.py", "security", "reviewed"),
        _cell("app/a.py", "tests", "pending"),
        _cell("app/deep/b.py", "security", "carried", 1, 2500),
        _cell("app/deep/b.py", "security", "frozen", 2501, 4000),
        _cell("README", "security", "failed"),
    ]
    skipped = [FileRow("vendor/x.min.js", "js", 10, 1, "h", "skipped", "generated (file name marks it)")]
    m = coverage_map(["security", "tests"], cells, skipped)
    states = {s["key"]: s for s in m["states"]}
    assert states["carried"]["count"] == 1 and states["carried"]["group"] == "done"
    assert states["carried"]["colour"] == next(style[2] for style in STATE_STYLES if style[0] == "carried")
    assert states["frozen"]["group"] == "other"
    assert states["frozen"]["colour"] == UNKNOWN_STATE_COLOUR and states["frozen"]["label"] == "frozen"
    assert states["pending"]["count"] == 1 and states["skipped"]["count"] == 0  # every known state is in the legend
    assert m["cells"] == 5 and m["lenses"] == ["security", "tests"]
    assert m["dirs"] == ["", "app", "app/deep", "vendor"]
    code = {s["key"]: str(i) for i, s in enumerate(m["states"])}
    files = {(m["dirs"][f[0]], f[1]): f[2:] for f in m["files"]}
    assert files[("app", "a.py")] == [[[1, 10, code["reviewed"] + code["pending"]]]]
    assert files[("app/deep", "b.py")] == [
        [[1, 2500, code["carried"] + NO_CELL], [2501, 4000, code["frozen"] + NO_CELL]]
    ]
    assert files[("", "README")] == [[[1, 10, code["failed"] + NO_CELL]]]
    assert files[("vendor", "x.min.js")] == [[], "generated (file name marks it)"]


def test_every_merge_writes_the_page_and_the_cli_prints_it(
    repo: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    service = AuditService(repo)  # on each store (AUDIT_MCP_STORE names the PostgreSQL one)
    step = service.next_step(CAPS)
    assert not service.report_html_path.exists()
    answer_run(service, hostile_reviewer(), step)  # the threat model's run
    first = embedded(service.report_html_path.read_text(encoding="utf-8"))
    assert first["provisional"] and first["completeness"] == "unknown" and len(first["runs"]) == 1
    assert first["runs"][0]["merged_at"] and first["threat_model"] is not None
    assert first["map"]["states"][[s["key"] for s in first["map"]["states"]].index("reviewed")]["count"] == 0
    answer_run(service, hostile_reviewer(), service.next_step())  # the review run
    second = embedded(service.report_html_path.read_text(encoding="utf-8"))
    reviewed = second["map"]["states"][[s["key"] for s in second["map"]["states"]].index("reviewed")]["count"]
    assert len(second["runs"]) == 2 and reviewed == second["coverage"]["by_kind"]["review"]["reviewed"] > 50
    assert second["findings"] and second["forecast"] is not None  # verification still to come

    code, printed = cli(capsys, "report", "--root", str(repo), "--format", "html")
    assert code == 0 and isinstance(printed, str) and printed.startswith("<!doctype html>")
    assert embedded(printed)["map"] == second["map"]
    assert service.report_html_path.read_text(encoding="utf-8") == printed  # and written where it belongs
