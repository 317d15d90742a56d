"""The audit page (report/report.html) in a real headless Chromium: the map has one cell per matrix cell and
zooms, the findings filter and sort, a hostile title and file name are only text, the console stays clean and
no request leaves the page. A screenshot of it is kept as an artifact."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.findings.page import render_page
from audit_mcp.findings.page_data import coverage_map
from audit_mcp.usecases.service import AuditService
from tests.browser import Browser
from tests.page_audit import (
    CAPS,
    HOSTILE_FILE,
    HOSTILE_TITLE,
    audit_to_the_end,
    embedded,
    hostile_repo,
    hostile_reviewer,
    isolated,
)

ARTIFACTS_ENV = "AUDIT_MCP_TEST_ARTIFACTS"  # where the screenshot goes (CI sets it); else the test's own folder


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The written page of a finished audit of the hostile fixture, and its JSON report."""
    base = tmp_path_factory.mktemp("page")
    with isolated(base):
        service = audit_to_the_end(hostile_repo(base))
        yield service.report_html_path, json.loads(service.report("json"))


def assert_clean(browser: Browser, url: str) -> None:
    """Nothing on the console, and no request but the page itself."""
    assert [e["message"] for e in browser.console()] == []
    assert browser.requests() == [], "the page asked for something after it loaded"


def _open(browser: Browser, page: Path) -> str:
    url = page.as_uri()
    browser.open(url)
    requested = browser.requests()
    assert requested == [url], requested
    return url


def _cells(browser: Browser) -> dict[str, int]:
    return dict(
        browser.run(
            "const out = {}; for (const c of document.querySelectorAll('#map-grid .cell'))"
            " out[c.dataset.state] = (out[c.dataset.state] || 0) + 1; return out;"
        )
    )


def test_the_map_draws_one_cell_per_matrix_cell_and_zooms(browser: Browser, audited: tuple[Path, Any]) -> None:
    page, report = audited
    url = _open(browser, page)
    review = {state: n for state, n in report["coverage"]["by_kind"]["review"].items() if n}
    assert sum(review.values()) > 50
    assert _cells(browser) == review  # every review cell, each in its own state, and nothing else
    legend = browser.run("return [...document.querySelectorAll('#legend [data-state]')].map(e => e.dataset.state)")
    assert {"reviewed", "pending", "failed", "skipped", "not_applicable", "assigned"} <= set(legend)

    browser.click("#map-close-all")  # close all: the repository's row alone
    assert _cells(browser) == {} and browser.run("return document.querySelectorAll('#map-grid .row.dir').length") == 1
    browser.click("#map-grid .row.dir .toggle")  # open the repository: its directories, no file of theirs yet
    top = browser.run("return [...document.querySelectorAll('#map-grid .row.dir')].map(r => r.dataset.path)")
    assert top[0] == "" and {"app", "web"} <= set(top[1:])
    browser.click("#map-open-all")  # open all again
    assert _cells(browser) == review
    assert_clean(browser, url)


def test_a_hostile_title_and_file_name_show_as_text(browser: Browser, audited: tuple[Path, Any]) -> None:
    page, report = audited
    url = _open(browser, page)
    stored = next(f for f in report["findings"] if f["title"].startswith("<script>"))
    assert "\x1b" not in stored["title"] and "[31mred" in stored["title"]  # validation dropped the escape bytes
    shown = browser.run(f"return document.querySelector('tr.finding[data-id=\"{stored['id']}\"] td.title').textContent")
    assert shown == stored["title"]
    assert "<script>" in shown and "**bold**" in shown and "[link](https://evil.example)" in shown
    names = browser.run("return [...document.querySelectorAll('#map-grid .name')].map(n => n.textContent)")
    assert HOSTILE_FILE.rsplit("/", 1)[1].replace("\u202e", "\\u202e") in names  # the override shown, not obeyed
    # Nothing of it became markup: our two scripts, no image, no element from a title or a name.
    assert browser.run("return document.scripts.length") == 2
    assert browser.run("return document.querySelectorAll('img, iframe, object, embed, a[href^=\"http\"]').length") == 0
    browser.click(f'tr.finding[data-id="{stored["id"]}"]')  # its details: evidence and description, as text
    detail = browser.run("return document.querySelector('tr.detail pre').textContent")
    assert detail == stored["evidence"]
    assert HOSTILE_TITLE.startswith(stored["title"][:40])
    assert_clean(browser, url)


def test_a_severity_filter_changes_the_rows_shown_and_the_columns_sort(
    browser: Browser, audited: tuple[Path, Any]
) -> None:
    page, report = audited
    url = _open(browser, page)
    rows = (
        "return [...document.querySelectorAll('#findings-table tr.finding')]"
        ".map(r => [r.dataset.id, r.dataset.severity])"
    )
    everything = browser.run(rows)
    assert sorted(i for i, _ in everything) == sorted(f["id"] for f in report["findings"])
    by_severity: dict[str, int] = {}
    for f in report["findings"]:
        by_severity[f["severity"]] = by_severity.get(f["severity"], 0) + 1
    hidden = max(by_severity, key=lambda s: by_severity[s])
    browser.click(f'#finding-filters input[data-severity="{hidden}"]')
    left = browser.run(rows)
    assert len(left) == len(everything) - by_severity[hidden] and hidden not in {s for _, s in left}
    assert browser.run("return document.getElementById('findings-count').textContent").startswith(f"{len(left)} of")
    browser.click(f'#finding-filters input[data-severity="{hidden}"]')
    assert len(browser.run(rows)) == len(everything)

    browser.click('#findings-table th button[data-sort="where"]')
    places = browser.run(
        "return [...document.querySelectorAll('#findings-table tr.finding td.where')].map(t => t.textContent)"
    )
    keyed = [(p.rsplit(":", 1)[0], int(p.rsplit(":", 1)[1].split("-")[0])) for p in places]
    assert keyed == sorted(keyed)
    browser.click('#findings-table th button[data-sort="where"]')  # again: the other way
    places = browser.run(
        "return [...document.querySelectorAll('#findings-table tr.finding td.where')].map(t => t.textContent)"
    )
    assert [(p.rsplit(":", 1)[0], int(p.rsplit(":", 1)[1].split("-")[0])) for p in places] == sorted(keyed)[::-1]
    refuted = browser.run("return document.querySelectorAll('#refuted-table tr.finding').length")
    assert refuted == len(report["refuted"]) > 0  # refuted findings apart, not in the main table
    assert_clean(browser, url)


def test_a_screenshot_of_the_page_is_written(browser: Browser, audited: tuple[Path, Any], tmp_path: Path) -> None:
    page, _ = audited
    url = _open(browser, page)
    where = Path(os.environ.get(ARTIFACTS_ENV) or tmp_path) / "audit-page.png"
    shot = browser.screenshot(where)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width >= 1000 and height > 1500, (width, height)  # the whole page, not the window alone
    assert_clean(browser, url)


def test_a_map_of_thousands_of_files_draws_only_the_rows_in_view(
    browser: Browser, audited: tuple[Path, Any], tmp_path: Path
) -> None:
    page, _ = audited
    doc = embedded(page.read_text(encoding="utf-8"))
    lenses = ["security", "correctness", "tests"]
    states = ["reviewed", "pending", "failed"]
    cells = [
        (f"pkg{n // 500}/area{n // 50}/m{n}.py", 1, 40, lens, states[(n + k) % 3])
        for n in range(6_000)
        for k, lens in enumerate(lenses)
    ]
    doc["map"] = coverage_map(lenses, cells)
    big = tmp_path / "big.html"
    big.write_text(render_page(doc), encoding="utf-8")
    url = _open(browser, big)
    assert browser.run("return document.querySelectorAll('#map-grid .row.dir').length") < 200  # opened a little
    browser.click("#map-open-all")
    drawn = browser.run("return document.querySelectorAll('#map-grid .row').length")
    assert 50 < drawn < 400  # 6,000 files and their directories open, the rows in view drawn
    browser.run("const g = document.getElementById('map-grid'); g.scrollTop = g.scrollHeight;")
    last = "pkg9/area99/m4999.py"  # the last row: directories and names in order (pkg9 after pkg11)
    units = "document.querySelectorAll('#map-grid .row.unit')"
    browser.wait(f"return [...{units}].some(r => r.dataset.path === '{last}')")
    shown = browser.run(
        f"return [...[...{units}].find(r => r.dataset.path === '{last}').querySelectorAll('.cell')]"
        ".map(c => c.dataset.state)"
    )
    assert shown == [states[(4999 + k) % 3] for k in range(3)]
    assert browser.run("return document.querySelectorAll('#map-grid .row').length") < 400
    assert_clean(browser, url)


def test_the_runs_show_a_429_its_cooldown_and_the_usage_reported(browser: Browser, repo: Path) -> None:
    service = AuditService(repo)
    step = service.next_step(CAPS)
    plan = json.loads(service.plan_path(step.run_id or "").read_text(encoding="utf-8"))
    refused = "429 Too Many Requests: rate_limit_error; retry-after: 90"
    throttled = len(plan["packets"])
    service.merge_and_ingest(plan["run_id"], [{"packet_id": p["packet_id"], "error": refused} for p in plan["packets"]])
    step = service.next_step()
    plan = json.loads(service.plan_path(step.run_id or "").read_text(encoding="utf-8"))
    reviewer = hostile_reviewer()
    for packet in plan["packets"]:
        usage = {"input_tokens": 1234, "output_tokens": 56, "api_calls": 3}
        assert service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet), usage).accepted
    service.merge_and_ingest(plan["run_id"])
    url = _open(browser, service.report_html_path)
    assert browser.run("return document.querySelectorAll('#timeline .r429').length") == throttled
    assert browser.run("return document.querySelectorAll('#timeline .cool').length") == 1
    table = browser.run(
        "return [...document.querySelectorAll('#runs-table tbody tr')].map(r => [...r.cells].map(c => c.textContent))"
    )
    first, second = table
    assert first[9] == str(throttled) and second[9] == "0"  # its 429s
    assert second[10] == str(1234 * len(plan["packets"]))  # the input tokens its packets reported
    cooldown_end = first[-1]
    assert cooldown_end != "-" and cooldown_end > first[3]  # ninety seconds after the refusal
    usage = browser.run("return document.querySelector('#summary .card:nth-child(6)').textContent")
    assert f"{1234 * len(plan['packets']):,}" in usage and "submission" in usage
    assert_clean(browser, url)
