"""CLI start, per verb: fresh ``python -m audit_mcp`` processes of this checkout and (``--baseline``) another.

    python benchmarks/cli_start.py [--runs 7] [--baseline CHECKOUT] [--keep DIR] [--markdown]

Each side gets its own copy of ``fixtures/planted_app`` (review runs only, a learned state of its own), its
first dispatch and one packet submitted. Then each round times, for each side in turn (the sides alternate,
so both see the same load): ``python -c pass``, ``--version``, ``--help``, ``quota``, ``status --json``,
``next-step`` (the run in flight: the same dispatch step), ``submit-packet`` (the accepted packet again: a
duplicate) and ``plan-status``. ``plan-status`` is a write transaction and moves the queue's generation, so an
untimed ``quota`` after it records the forecast again: every timed ``quota`` and ``status`` reads it, as after a
dispatch. The processes write bytecode, as an installed package has it; the first round warms the page cache
and writes it, and is not counted. Prints the best and the median wall time and CPU time (user and system, which
other load on a shared machine moves less) of each verb and side in ms, and the ratios of the bests, as JSON
(``--markdown``: a table).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FIXTURE = HERE.parent / "fixtures" / "planted_app"
CONFIG = "context_pass = false\nverification_pass = false\n"


def _env(checkout: Path, side: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(checkout), "AUDIT_MCP_STATE_DIR": str(side / "state")}


def _cli(checkout: Path, side: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    where = ("--root", str(side / "app"), "--artifacts-dir", str(side / "art"))
    return subprocess.run(
        [sys.executable, "-m", "audit_mcp", *argv, *where],
        env=_env(checkout, side),
        cwd=side,  # not the checkout: the current directory comes first on sys.path
        capture_output=True,
        text=True,
        check=False,
    )


def _prepare(checkout: Path, side: Path) -> dict[str, str]:
    """The fixture's copy, its first dispatch and one packet submitted; the ids and files the verbs name."""
    shutil.copytree(FIXTURE, side / "app")
    (side / "app" / ".audit-mcp.toml").write_text(CONFIG)
    for argv in (["init", "-q"], ["add", "-A"], ["-c", "user.email=b@b", "-c", "user.name=b", "commit", "-qm", "x"]):
        subprocess.run(["git", *argv], cwd=side / "app", check=True)
    step = _cli(checkout, side, "next-step", "--host-can-dispatch-subagents", "true")
    plan = json.loads(Path(json.loads(step.stdout)["artifact_paths"]["plan"]).read_text())
    packet = plan["packets"][0]
    answers = [
        {
            "task_id": t["task_id"],
            "status": "reviewed",
            "findings": [],
            "summary": f"Read {t['file']} lines {t['start_line']}-{t['end_line']} under {t['lens']}: nothing to "
            "report; the inputs it takes are checked before use.",
        }
        for t in packet["tasks"]
    ]
    results = side / "results.json"
    results.write_text(json.dumps(answers))
    ids = {"run": plan["run_id"], "packet": packet["packet_id"], "results": str(results)}
    submitted = _cli(
        checkout, side, "submit-packet", "--run-id", ids["run"], "--packet-id", ids["packet"], "--results", str(results)
    )
    if submitted.returncode != 0:
        raise SystemExit(f"{checkout}: the first submission was refused: {submitted.stdout}")
    return ids


def _verbs(ids: dict[str, str]) -> dict[str, list[str]]:
    return {
        "python -c pass": [],
        "--version": ["--version"],
        "--help": ["--help"],
        "quota": ["quota"],
        "status --json": ["status", "--json"],
        "next-step": ["next-step"],
        "submit-packet (a duplicate)": [
            *("submit-packet", "--run-id", ids["run"], "--packet-id", ids["packet"], "--results", ids["results"])
        ],
        "plan-status": ["plan-status", "--run-id", ids["run"]],
    }


def _time(checkout: Path, side: Path, argv: list[str]) -> tuple[float, float]:
    """One fresh process: its wall time and its CPU time (user and system), in ms."""
    if not argv:
        command = [sys.executable, "-c", "pass"]
    else:
        where = [] if argv[0].startswith("--") else ["--root", str(side / "app"), "--artifacts-dir", str(side / "art")]
        command = [sys.executable, "-m", "audit_mcp", *argv, *where]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(command, env=_env(checkout, side), cwd=side, capture_output=True, check=False)
    elapsed = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{checkout}: {' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return elapsed, cpu


def measure(base: Path, runs: int, baseline: Path | None) -> dict[str, Any]:
    sides = {"this": HERE.parent} | ({"baseline": baseline} if baseline is not None else {})
    ids = {}
    for name, checkout in sides.items():
        (base / name).mkdir()
        ids[name] = _prepare(checkout, base / name)
    times: dict[str, dict[str, list[float]]] = {name: {} for name in sides}
    cpu: dict[str, dict[str, list[float]]] = {name: {} for name in sides}
    for round_no in range(runs + 1):
        for name, checkout in sides.items():
            for verb, argv in _verbs(ids[name]).items():
                elapsed, used = _time(checkout, base / name, argv)
                if round_no:  # the first round warms the page cache and writes bytecode
                    times[name].setdefault(verb, []).append(elapsed)
                    cpu[name].setdefault(verb, []).append(used)
            _cli(checkout, base / name, "quota")  # untimed: the forecast recorded again after plan-status
    out: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average": round(os.getloadavg()[0], 2),
        "runs": runs,
        "verbs": {},
    }
    for verb in times["this"]:
        row: dict[str, Any] = {}
        for name in sides:
            row[f"{name}_best_ms"] = round(min(times[name][verb]), 1)
            row[f"{name}_median_ms"] = round(statistics.median(times[name][verb]), 1)
            row[f"{name}_cpu_best_ms"] = round(min(cpu[name][verb]), 1)
            row[f"{name}_cpu_median_ms"] = round(statistics.median(cpu[name][verb]), 1)
        if baseline is not None:
            row["ratio_of_bests"] = round(row["baseline_best_ms"] / row["this_best_ms"], 2)
            row["cpu_ratio_of_bests"] = round(row["baseline_cpu_best_ms"] / row["this_cpu_best_ms"], 2)
        out["verbs"][verb] = row
    return out


def markdown(result: dict[str, Any]) -> str:
    """Wall, then CPU: best / median ms of each side, and the ratio of the bests (baseline over this)."""
    two = any("baseline_best_ms" in row for row in result["verbs"].values())
    head = "| verb | " + (
        "baseline wall | this wall | ratio | baseline CPU | this CPU | ratio |" if two else "wall | CPU |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for verb, row in result["verbs"].items():
        cells = [f"`{verb}`"]
        for kind in ("", "cpu_"):
            for name in ("baseline", "this") if two else ("this",):
                cells.append(f"{row[f'{name}_{kind}best_ms']:.0f} / {row[f'{name}_{kind}median_ms']:.0f}")
            if two:
                cells.append(f"{row[f'{kind}ratio_of_bests']:.2f}x")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="counted rounds (default 7)")
    parser.add_argument("--baseline", type=Path, help="another checkout, timed alternately with this one")
    parser.add_argument("--keep", type=Path, help="work in this directory (created) and keep it")
    parser.add_argument("--markdown", action="store_true", help="print a table instead of JSON")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="cli-start-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        result = measure(base, args.runs, args.baseline.resolve() if args.baseline else None)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    print(markdown(result) if args.markdown else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
