"""The audit page at scale: a 20,000-file audit's report.html, its weight, and how fast a browser opens it.

Generates ``scale.py``'s structured repository, audits it to the end in a child process (review runs only,
every packet answered, one finding in every 20th Python module under the security lens), and times each merge
with the page written after it and the page's own share of that merge. Then opens the finished page (and the
one written after the first merge, half reviewed) in a fresh headless Chromium ``--opens`` times each: the
wall time from navigation to the page having drawn itself, and the page's own mark of when it had (from the
navigation's start). With ``--baseline CHECKOUT`` (another checkout, without the page), the same first merge
is timed there too, side by side.

    python benchmarks/page.py [--files 20000] [--keep DIR] [--opens 5] [--baseline CHECKOUT]

Prints one JSON document. Needs Debian's chromium and chromium-driver.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the tests' ChromeDriver client, and scale.py's repository

from benchmarks.scale import _machine, _review_only, generate  # noqa: E402
from tests.browser import chromium  # noqa: E402

_AUDIT = """
import json, shutil, sys, time
from pathlib import Path
from audit_mcp.usecases.service import AuditService
root, artifacts, config = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
keep, runs_at_most = Path(sys.argv[4]), int(sys.argv[5])
service = AuditService(root, artifacts, config_path=config)
step = service.next_step({"can_dispatch_subagents": True})
try:
    from audit_mcp.usecases import reporting
except ImportError:
    reporting = None
write_page = getattr(reporting, "write_page", None)
merges, findings = [], 0
def results(packet):
    global findings
    out = []
    for t in packet["tasks"]:
        found = []
        name = t["file"].rsplit("/", 1)[-1]
        if t["lens"] == "security" and name.startswith("m") and name.endswith(".py") and int(name[1:-3]) % 20 == 10:
            lines = (root / t["file"]).read_text().splitlines()
            at = next((i for i, text in enumerate(lines, 1) if "json.loads(request.body)" in text), 0)
            if t["start_line"] <= at <= t["end_line"]:
                findings += 1
                found.append({"title": f"Request body parsed without a size limit in {name}", "severity": "medium",
                    "confidence": "medium", "category": "CWE-400", "file": t["file"], "start_line": at,
                    "end_line": at, "evidence": lines[at - 1].strip(),
                    "description": "The whole body is read and parsed before any check of its size.",
                    "recommendation": "Cap the body's size before parsing it."})
        out.append({"task_id": t["task_id"], "status": "reviewed", "findings": found,
                    "summary": f"Read {t['file']} lines {t['start_line']}-{t['end_line']} under {t['lens']}."})
    return out
while step.step_kind == "dispatch_review" and len(merges) < runs_at_most:
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    for packet in plan["packets"]:
        receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results(packet))
        assert receipt.accepted, receipt.errors
    t0 = time.perf_counter()
    summary = service.merge_and_ingest(plan["run_id"], [])
    merge = time.perf_counter() - t0
    page = None
    if write_page is not None:  # the page's share: written again from the same state
        t0 = time.perf_counter()
        write_page(service)
        page = time.perf_counter() - t0
        if not merges:
            shutil.copy(service.report_html_path, keep)
    merges.append({"run": plan["run_id"], "packets": len(plan["packets"]), "tasks_covered": summary.tasks_covered,
                   "merge_seconds": round(merge, 3), "page_write_seconds": None if page is None else round(page, 3)})
    step = service.next_step()
print(json.dumps({"merges": merges, "final_step": step.step_kind, "findings_submitted": findings}))
"""


def _child(code: str, *args: str, checkout: Path = HERE.parent) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=checkout)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _opens(page: Path, profile_base: Path, times: int) -> dict[str, Any]:
    """Open ``page`` ``times`` times, each in a fresh browser (a cold profile): wall seconds to drawn, and the
    page's own mark of when it had drawn itself, from the navigation's start."""
    walls, marks = [], []
    for n in range(times):
        with chromium(profile_base / f"profile-{page.stem}-{n}") as browser:
            walls.append(browser.open(page.as_uri(), timeout=120))
            marks.append(browser.run("return performance.getEntriesByName('audit-page-rendered')[0].startTime"))
            errors = browser.console()
            if errors:
                raise SystemExit(f"the page logged errors: {errors[:3]}")
            if n == 0:
                rows = browser.run("return document.querySelectorAll('#map-grid .row').length")
                t0 = time.perf_counter()
                browser.click("#map-open-all")
                opened = time.perf_counter() - t0
                cells = browser.run("return document.querySelectorAll('#map-grid .cell').length")
    return {
        "bytes": page.stat().st_size,
        "open_seconds": [round(w, 3) for w in walls],
        "open_seconds_median": round(statistics.median(walls), 3),
        "drawn_ms_from_navigation": [round(m, 1) for m in marks],
        "drawn_ms_median": round(statistics.median(marks), 1),
        "map_rows_at_first": rows,
        "open_all_seconds": round(opened, 3),
        "cells_drawn_after_open_all": cells,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--keep", type=Path, help="generate the repository here and keep it")
    parser.add_argument("--opens", type=int, default=5, help="fresh-browser opens of each page")
    parser.add_argument("--packets", type=int, default=500, help="packets per run")
    parser.add_argument("--runs", type=int, default=50, help="runs at most")
    parser.add_argument("--baseline", type=Path, help="another checkout: its first merge, timed side by side")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="audit-mcp-page-"))
    root = base / "repo"
    shutil.rmtree(base / "learned-state", ignore_errors=True)
    os.environ["AUDIT_MCP_STATE_DIR"] = str(base / "learned-state")
    os.environ["AUDIT_MCP_PROBE"] = "never"
    try:
        if not root.exists():
            root.mkdir(parents=True)
            generate(root, args.files)
        config = _review_only(HERE.parent, base / "page.toml", f"max_packets_per_run = {args.packets}\n")
        shutil.rmtree(base / "artifacts", ignore_errors=True)
        first = base / "first-merge.html"
        audit = _child(_AUDIT, str(root), str(base / "artifacts"), str(config), str(first), str(args.runs))
        final = base / "artifacts" / "report" / "report.html"
        doc = {
            "machine": _machine(),
            "files": args.files,
            "audit": audit,
            "page_after_first_merge": _opens(first, base, args.opens),
            "page_final": _opens(final, base, args.opens),
        }
        if args.baseline is not None:
            theirs = _review_only(args.baseline, base / "page-baseline.toml", f"max_packets_per_run = {args.packets}\n")
            for side in ("artifacts-ours", "artifacts-baseline"):
                shutil.rmtree(base / side, ignore_errors=True)
            ours = _child(_AUDIT, str(root), str(base / "artifacts-ours"), str(config), str(base / "x.html"), "1")
            them = _child(
                _AUDIT,
                str(root),
                str(base / "artifacts-baseline"),
                str(theirs),
                str(base / "y.html"),
                "1",
                checkout=args.baseline,
            )
            doc["first_merge_side_by_side"] = {
                "this_seconds": ours["merges"][0]["merge_seconds"],
                "this_page_write_seconds": ours["merges"][0]["page_write_seconds"],
                "baseline_seconds": them["merges"][0]["merge_seconds"],
                "ratio": round(ours["merges"][0]["merge_seconds"] / them["merges"][0]["merge_seconds"], 2),
            }
        print(json.dumps(doc, indent=2))
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
