"""Scale benchmark: the first next_step on a generated 20,000-file git repository, against reading every
tracked byte in the same run; peak memory; submit_packet p50/p99 and merge_and_ingest of 500 packets;
the size of every tool result; ``quota`` and ``status`` in-process and through the command line, first after
a dispatch and first after a merge (with ``--baseline``, the other checkout's side by side).

    python benchmarks/scale.py [--files 20000] [--keep DIR] [--baseline CHECKOUT] [--views-only]

Prints one JSON document. Each measured phase runs in a fresh child process, so its peak memory
(ru_maxrss) is its own.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TOKEN_CHARS = 4  # a rough, conservative characters-per-token ratio for JSON

_PY = """\"\"\"Module {n}: request handling for area {area}.\"\"\"

import json

from . import m{sib}
from {pkg}.area{far:03d}.m{farn} import helper_{farn}


def handle_{n}(request, store):
    \"\"\"Read the request body, look the user up and answer.\"\"\"
    body = json.loads(request.body)
    user = store.get(body["user_id"])
    if user is None:
        return {{"status": 404}}
    total = 0
    for item in body.get("items", []):
        total += int(item["price"]) * int(item.get("count", 1))
    return {{"status": 200, "user": user["name"], "total": m{sib}.helper_{sib}(total) + helper_{farn}(total)}}


def helper_{n}(value):
    return value * {n} % 97


class Cache{n}:
    def __init__(self):
        self.items = {{}}

    def get(self, key):
        return self.items.get(key)

    def put(self, key, value):
        self.items[key] = value
"""

_JS = """// Module {n}: client helpers for area {area}.
const api = require("./m{sib}");
import {{ render{farn} }} from "../area{far:03d}/m{farn}";

function render{n}(user) {{
  const el = document.createElement("div");
  el.textContent = user.name;
  return el;
}}

async function load{n}(id) {{
  const res = await fetch(`/api/users/${{id}}`);
  if (!res.ok) throw new Error(`load failed: ${{res.status}}`);
  return res.json();
}}

module.exports = {{ render{n}, load{n}, api, render{farn} }};
"""

_TEST = """\"\"\"Tests of module {target}.\"\"\"

from {pkg}.area{area:03d}.m{target} import handle_{target}, helper_{target}


class Request:
    def __init__(self, body):
        self.body = body


def test_helper_{target}_is_bounded():
    assert 0 <= helper_{target}(12345) < 97


def test_handle_{target}_answers_404_for_an_unknown_user():
    assert handle_{target}(Request('{{"user_id": 1}}'), {{}})["status"] == 404
"""

_INIT = '"""Area {area} of package {pkg}."""\n\nfrom . import m{first}\n'
_CONFIGS = (
    (
        "settings.toml",
        '[area]\nname = "area{area}"\nworkers = 4\ntimeout_seconds = 30\n\n[db]\nurl = "sqlite:///area{area}.db"\n',
    ),
    ("deploy.yaml", 'service: area{area}\nreplicas: 2\nenv:\n  LOG_LEVEL: info\n  PORT: "80{area:02d}"\n'),
    ("package.json", '{{\n  "name": "area{area}",\n  "version": "1.0.{area}",\n  "main": "m{first}.js"\n}}\n'),
)
_HUGE_EVERY = 5_000  # one huge module (4,000 lines: three chunks) per this many files
_HUGE_LINES = 4_000


def _huge(n: int) -> str:
    body = [f'"""Module {n}: a long table of handlers, chunked for review."""\n', "import json\n"]
    for k in range(_HUGE_LINES // 4):
        body.append(f"\n\ndef table_{k}(value):\n    return json.dumps({{'k': {k}, 'v': value * {k} % 101}})\n")
    return "".join(body)


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=b@example.com", "-c", "user.name=bench", "-c", "init.defaultBranch=main", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def generate(root: Path, files: int) -> None:
    """``files`` files in two top-level Python packages (``a/``, ``b/``) of areas of 100: per area an
    ``__init__.py``, a config file, four test modules, and Python and JavaScript modules whose imports
    resolve (a sibling in the area, one module of another area: about two edges per module), plus one huge
    module per 5,000 files that chunks."""
    for n in range(files):
        pkg = "a" if n < files // 2 else "b"
        area, slot = divmod(n, 100)
        folder = root / pkg / f"area{area:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        areas = max(1, files // 100)
        far = (area * 37 + 11) % areas
        if (far < areas // 2) != (pkg == "a") or far * 100 + 10 >= files:
            far = area
        js = slot % 4 == 3
        farn = far * 100 + (11 if js else 10) + (slot % 20) * 4  # a module of the other area, same language
        sib = n + 4 if js and slot < 96 else n - 4 if js else (n - 1 if slot > 10 and slot % 4 != 0 else n + 2)
        if slot == 0:
            (folder / "__init__.py").write_text(_INIT.format(area=area, pkg=pkg, first=n + 10))
        elif slot == 1:
            name, text = _CONFIGS[area % len(_CONFIGS)]
            (folder / name).write_text(text.format(area=area, first=n + 12))
        elif slot in (2, 3, 4, 5):
            (folder / "tests").mkdir(exist_ok=True)
            target = area * 100 + 10 + 4 * slot
            (folder / "tests" / f"test_m{target}.py").write_text(_TEST.format(pkg=pkg, area=area, target=target))
        elif slot < 10:
            (folder / f"notes{slot}.md").write_text(
                f"# Area {area}, note {slot}\n\nHow area {area} handles requests.\n"
            )
        elif n % _HUGE_EVERY == 50:
            (folder / f"m{n}.py").write_text(_huge(n))
        elif js:
            (folder / f"m{n}.js").write_text(_JS.format(n=n, area=area, sib=sib, far=far, farn=farn))
        else:
            (folder / f"m{n}.py").write_text(_PY.format(n=n, area=area, pkg=pkg, sib=sib, far=far, farn=farn))
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "generated")


def _child(code: str, *args: str, checkout: Path = HERE.parent) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter that imports audit_mcp from ``checkout``."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False, cwd=checkout
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


_FIRST_STEP = """
import json, resource, sys, time
from pathlib import Path
from audit_mcp.usecases.service import AuditService
root, artifacts = Path(sys.argv[1]), Path(sys.argv[2])
config = Path(sys.argv[3]) if len(sys.argv) > 3 else None
def cpu_now():  # this process and the git calls it waited for
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
t0, cpu0 = time.perf_counter(), cpu_now()
service = AuditService(root, artifacts, config_path=config)
step = service.next_step({"can_dispatch_subagents": True})
seconds = time.perf_counter() - t0
cpu = cpu_now() - cpu0
plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
# The largest process it waited for: git's, or a copy that read a slice of the files at intake.
children_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
timings = {}
for name, call in (("quota", service.quota), ("status", service.status)):
    runs = []
    for _ in range(3):
        t1 = time.perf_counter()
        call().model_dump_json()
        runs.append(time.perf_counter() - t1)
    timings[name + "_ms"] = round(1000 * min(runs), 1)
    timings[name + "_first_ms"] = round(1000 * runs[0], 1)  # the first call after the step: nothing kept yet
def db_bytes():
    return sum(f.stat().st_size for f in artifacts.iterdir() if f.name.startswith("audit.sqlite3"))
working = db_bytes()  # with the write-ahead log of a store that keeps its connections open
service.store.close()  # the last connection closing folds the log into the database and removes it
db = db_bytes()
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "peak_rss_mb": peak,
                  "children_peak_rss_mb": children_peak, **timings, "db_bytes": db,
                  "db_bytes_while_open": working,
                  "prompt_bytes": sum(f.stat().st_size for f in artifacts.rglob("*.md")),
                  "step_kind": step.step_kind, "packets": len(plan["packets"]),
                  "tasks": sum(len(p["tasks"]) for p in plan["packets"]),
                  "step_result_chars": len(step.model_dump_json()),
                  "plan_file_chars": len(Path(step.artifact_paths["plan"]).read_text())}))
"""

_SUBMIT_AND_MERGE = """
import json, os, resource, sys, time
from pathlib import Path
from audit_mcp.usecases.service import AuditService
root, artifacts, config = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
service = AuditService(root, artifacts, config_path=config)
step = service.next_step()
plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
times, cpu_times, receipt_chars = [], [], 0
for packet in plan["packets"]:
    results = [{"task_id": t["task_id"], "status": "reviewed", "findings": [],
                "summary": f"Read {t['file']} lines {t['start_line']}-{t['end_line']} under {t['lens']}: the "
                           "request body is parsed, looked up and summed; no injection, no unchecked input."}
               for t in packet["tasks"]]
    t0, c0 = time.perf_counter(), time.process_time()
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
    times.append(time.perf_counter() - t0)
    cpu_times.append(time.process_time() - c0)
    assert receipt.accepted, receipt.errors
    receipt_chars = max(receipt_chars, len(receipt.model_dump_json()))
t0, c0 = time.perf_counter(), time.process_time()
summary = service.merge_and_ingest(plan["run_id"], [])
merge_seconds, merge_cpu = time.perf_counter() - t0, time.process_time() - c0
t0 = time.perf_counter()
final = service.next_step()
final_seconds = time.perf_counter() - t0
times.sort()
cpu_times.sort()
print(json.dumps({
    "tasks": sum(len(p["tasks"]) for p in plan["packets"]), "packets": len(plan["packets"]),
    "submit_p50_ms": 1000 * times[len(times) // 2], "submit_p99_ms": 1000 * times[min(len(times) - 1,
                                                                                      int(len(times) * 0.99))],
    "submit_max_ms": 1000 * times[-1], "merge_seconds": merge_seconds, "merge_covered": summary.tasks_covered,
    "submit_cpu_p50_ms": 1000 * cpu_times[len(cpu_times) // 2],
    "submit_cpu_p99_ms": 1000 * cpu_times[min(len(cpu_times) - 1, int(len(cpu_times) * 0.99))],
    "merge_cpu_seconds": merge_cpu, "load_average": os.getloadavg()[0],
    "synthesis_next_step_seconds": final_seconds, "final_step": final.step_kind,
    "receipt_max_chars": receipt_chars, "merge_summary_chars": len(summary.model_dump_json()),
    "final_step_chars": len(final.model_dump_json()),
    "status_chars": len(service.status().model_dump_json()),
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


# The views after each change that moves the queue: a dispatch (the first step), then a merge of its run with
# every packet answered. In-process: the first call after the change, then the other view, then both again with
# nothing changed; the command line's calls (fresh processes) are made by the parent between the phases.
_VIEWS = """
import json, sys, time
from pathlib import Path
from audit_mcp.usecases.service import AuditService
root, artifacts, config, phase = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
service = AuditService(root, artifacts, config_path=config)
def timed(call):
    t0, c0 = time.perf_counter(), time.process_time()
    call()
    return round(1000 * (time.perf_counter() - t0), 1), round(1000 * (time.process_time() - c0), 1)
out = {}
if phase == "dispatch":
    out["step_ms"], out["step_cpu_ms"] = timed(lambda: service.next_step({"can_dispatch_subagents": True}))
    order = (("quota", service.quota), ("status", service.status))
else:
    step = service.next_step()
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    for packet in plan["packets"]:
        results = [{"task_id": t["task_id"], "status": "reviewed", "findings": [],
                    "summary": f"Read {t['file']} lines {t['start_line']}-{t['end_line']} under {t['lens']}: the "
                               "request body is parsed, looked up and summed; no injection, no unchecked input."}
                   for t in packet["tasks"]]
        receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
        assert receipt.accepted, receipt.errors
    out["merge_ms"], out["merge_cpu_ms"] = timed(lambda: service.merge_and_ingest(plan["run_id"], []))
    order = (("status", service.status), ("quota", service.quota))
for n, (name, call) in enumerate(order):
    out[f"{name}_{'first' if n == 0 else 'second'}_ms"], out[f"{name}_{'first' if n == 0 else 'second'}_cpu_ms"] = (
        timed(lambda: call().model_dump_json()))
for name, call in order:
    out[f"{name}_unchanged_ms"], out[f"{name}_unchanged_cpu_ms"] = timed(lambda: call().model_dump_json())
print(json.dumps(out))
"""


def _read_all_bytes(root: Path) -> float:
    return _read_all_bytes_timed(root)[0]


def _read_all_bytes_timed(root: Path) -> tuple[float, float]:
    """Wall and CPU seconds (of git, xargs and cat) of reading every tracked byte."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run("git ls-files -z | xargs -0 cat > /dev/null", shell=True, cwd=root, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu


def _code_bytes(root: Path) -> int:
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True).stdout
    return sum((root / name).stat().st_size for name in listing.decode().split("\0") if name)


def _cli(*args: str) -> float:
    """Wall time of one CLI call in a fresh interpreter (process start, imports and the verb)."""
    return _cli_timed(*args)[0]


def _cli_timed(*args: str, checkout: Path = HERE.parent) -> tuple[float, float]:
    """Wall and CPU seconds of one CLI call of ``checkout`` in a fresh interpreter (process start, imports and
    the verb)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "audit_mcp", *args], cwd=checkout, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _python_start() -> tuple[float, float]:
    """Wall and CPU seconds of ``python -c pass`` with this interpreter."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def _views(root: Path, base: Path, rounds: int, baseline: Path | None) -> dict[str, Any]:
    """``quota`` and ``status`` after a dispatch and after a merge, in-process and through the command line,
    for this checkout and (``baseline``) the other one, alternating, ``rounds`` times each."""
    sides = [("this", HERE.parent)] + ([("baseline", baseline)] if baseline is not None else [])
    out: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in sides}
    for _ in range(rounds):
        for name, checkout in sides:
            artifacts = base / f"artifacts-views-{name}"
            shutil.rmtree(artifacts, ignore_errors=True)
            config = _review_only(checkout, base / f"views-{name}.toml")
            at = ("--root", str(root), "--artifacts-dir", str(artifacts), "--config", str(config))
            sample: dict[str, Any] = {}
            for phase in ("dispatch", "merge"):
                child = _child(_VIEWS, str(root), str(artifacts), str(config), phase, checkout=checkout)
                sample[phase] = {"in_process": child}
                # A fresh process per call, after the in-process views: a process keeps nothing from another
                # but what the store holds (the baseline packs in each; this code reads what was recorded).
                for verbs in (("quota",), ("status", "--json")):
                    wall, cpu = _cli_timed(*verbs, *at, checkout=checkout)
                    sample[phase][f"cli_{verbs[0]}_ms"] = round(1000 * wall, 1)
                    sample[phase][f"cli_{verbs[0]}_cpu_ms"] = round(1000 * cpu, 1)
            wall, cpu = min(_cli_timed("--version", checkout=checkout) for _ in range(3))
            sample["cli_version_ms"], sample["cli_version_cpu_ms"] = round(1000 * wall, 1), round(1000 * cpu, 1)
            # The floor of any command-line call: the interpreter starting and stopping, importing nothing.
            wall, cpu = min(_python_start() for _ in range(3))
            sample["python_start_ms"], sample["python_start_cpu_ms"] = round(1000 * wall, 1), round(1000 * cpu, 1)
            sample["load_average"] = os.getloadavg()[0]
            out[name].append(sample)
    return out


def _machine() -> dict[str, str]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _review_only(checkout: Path, where: Path, extra: str = "") -> Path:
    """A config file (written to ``where``) with which ``checkout``'s runs are review runs only: no threat
    model packet before them (it would be the run the first step hands out) and no verification after. A
    checkout from before those passes has neither, nor their settings, which it would refuse."""
    known = (checkout / "audit_mcp" / "core" / "config.py").read_text()
    where.write_text(extra + "".join(f"{k} = false\n" for k in ("context_pass", "verification_pass") if k in known))
    return where


def _first_steps(root: Path, base: Path, rounds: int, baseline: Path | None = None) -> dict[str, Any]:
    """``rounds`` interleaved rounds of: read every byte, the first next_step in-process, the same through
    the CLI, and (with ``baseline``, another checkout) its first next_step in-process; each ratio against
    the read of its own round."""
    samples: list[dict[str, Any]] = []
    config = str(_review_only(HERE.parent, base / "first.toml"))
    for _ in range(rounds):
        before: dict[str, Any] = {}
        if baseline is not None:
            shutil.rmtree(base / "artifacts-baseline", ignore_errors=True)
            theirs = str(_review_only(baseline, base / "first-baseline.toml"))
            before = _child(_FIRST_STEP, str(root), str(base / "artifacts-baseline"), theirs, checkout=baseline)
        read, read_cpu = _read_all_bytes_timed(root)
        shutil.rmtree(base / "artifacts-full", ignore_errors=True)
        step = _child(_FIRST_STEP, str(root), str(base / "artifacts-full"), config)
        shutil.rmtree(base / "artifacts-cli", ignore_errors=True)
        cli = _cli("next-step", "--root", str(root), "--artifacts-dir", str(base / "artifacts-cli"), "--config", config)
        samples.append(
            {
                "read_seconds": round(read, 3),
                "step": step,
                "cli_seconds": round(cli, 3),
                "ratio": round(step["seconds"] / read, 2),
                "cli_ratio": round(cli / read, 2),
                # CPU seconds against CPU seconds: what the wall-time ratio is on an idle machine, give or
                # take the I/O waits, and much steadier while other jobs share the CPUs.
                "read_cpu_seconds": round(read_cpu, 3),
                "cpu_ratio": round(step["cpu_seconds"] / read_cpu, 2) if read_cpu else None,
                **(
                    {
                        "baseline_seconds": round(before["seconds"], 3),
                        "baseline_ratio": round(before["seconds"] / read, 2),
                        "baseline_cpu_ratio": round(before.get("cpu_seconds", 0) / read_cpu, 2) if read_cpu else None,
                        "baseline_quota_ms": before["quota_ms"],
                        "baseline_status_ms": before["status_ms"],
                        "baseline_quota_first_ms": before["quota_first_ms"],
                        "baseline_status_first_ms": before["status_first_ms"],
                        "baseline_peak_rss_mb": round(before["peak_rss_mb"], 1),
                        "baseline_db_bytes": before["db_bytes"],
                        "baseline_db_bytes_while_open": before.get("db_bytes_while_open"),
                    }
                    if before
                    else {}
                ),
                "load_average": os.getloadavg()[0],
            }
        )
    return {
        "ratio_range": [min(s["ratio"] for s in samples), max(s["ratio"] for s in samples)],
        "cli_ratio_range": [min(s["cli_ratio"] for s in samples), max(s["cli_ratio"] for s in samples)],
        "cpu_ratio_range": [min(s["cpu_ratio"] or 0 for s in samples), max(s["cpu_ratio"] or 0 for s in samples)],
        "rounds": samples,
    }


def _growth(base: Path, sizes: list[int]) -> list[dict[str, Any]]:
    """The first next_step against reading every byte, in-process, at each size (one round each)."""
    table = []
    for files in sizes:
        root = base / f"repo-{files}"
        if not root.exists():
            root.mkdir(parents=True)
            generate(root, files)
        _read_all_bytes(root)
        read = min(_read_all_bytes(root) for _ in range(2))
        shutil.rmtree(base / "artifacts-growth", ignore_errors=True)
        step = _child(
            _FIRST_STEP, str(root), str(base / "artifacts-growth"), str(_review_only(HERE.parent, base / "first.toml"))
        )
        table.append(
            {
                "files": files,
                "read_seconds": round(read, 3),
                "first_step_seconds": round(step["seconds"], 3),
                "ratio": round(step["seconds"] / read, 2),
                "us_per_file": round(1e6 * step["seconds"] / files, 1),
                "peak_rss_mb": round(step["peak_rss_mb"], 1),
                "load_average": os.getloadavg()[0],
            }
        )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the first-step comparison")
    parser.add_argument("--growth", default="", help="comma-separated sizes for the growth table (2000,50000)")
    parser.add_argument("--packets", type=int, default=500, help="packets of the submit and merge phase")
    parser.add_argument("--keep", type=Path, help="generate the repository here and keep it")
    parser.add_argument(
        "--baseline", type=Path, help="another checkout (with this script's phases) to time side by side, in-process"
    )
    parser.add_argument(
        "--views-only", action="store_true", help="only quota and status after a dispatch and a merge (and the CLI's)"
    )
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="audit-mcp-scale-"))
    root = base / "repo"
    # A learned state of its own, empty at the start: what other runs on this machine learned (a learned cap
    # of 1 after rate limits, say) would otherwise set the width, and with it the first step's work.
    shutil.rmtree(base / "learned-state", ignore_errors=True)
    os.environ["AUDIT_MCP_STATE_DIR"] = str(base / "learned-state")
    try:
        t0 = time.perf_counter()
        if not root.exists():
            root.mkdir(parents=True)
            generate(root, args.files)
        generated = time.perf_counter() - t0
        _read_all_bytes(root)  # warm the page cache for both sides alike
        if args.views_only:
            views = _views(root, base, args.rounds, args.baseline)
            print(json.dumps({"machine": _machine(), "views": views}, indent=2))
            return
        baseline = min(_read_all_bytes(root) for _ in range(3))
        first = _first_steps(root, base, args.rounds, args.baseline)
        step = first["rounds"][-1]["step"]
        at = (
            "--root",
            str(root),
            "--artifacts-dir",
            str(base / "artifacts-full"),
            "--config",
            str(base / "first.toml"),
        )
        views = {
            "quota_cli_seconds": round(_cli("quota", *at), 3),
            "status_cli_seconds": round(_cli("status", "--json", *at), 3),
            "cli_start_seconds": round(min(_cli("--version") for _ in range(3)), 3),
        }
        shutil.rmtree(base / "artifacts-run", ignore_errors=True)
        run_config = base / "run.toml"
        # A run of review packets, as the baseline measured it: no context packet before it (it would be the
        # run handed out) and no verification run after it.
        _review_only(HERE.parent, run_config, f"max_packets_per_run = {args.packets}\n")
        _child(_FIRST_STEP, str(root), str(base / "artifacts-run"), str(run_config))
        submit = _child(_SUBMIT_AND_MERGE, str(root), str(base / "artifacts-run"), str(run_config))
        code = _code_bytes(root)
        out = {
            "machine": _machine(),
            "files": args.files,
            "code_bytes": code,
            "generate_seconds": round(generated, 2),
            "read_all_bytes_seconds": round(baseline, 3),
            "first_next_step": step,
            "first_next_step_ratio": first["rounds"][-1]["ratio"],
            "first_next_step_rounds": first,
            "database_to_code_ratio": round(step["db_bytes"] / code, 2),
            "database_while_open_to_code_ratio": round(step["db_bytes_while_open"] / code, 2),
            **views,
            "run_of_packets": submit,
            "views": _views(root, base, args.rounds, args.baseline),
            "largest_tool_result_tokens": max(
                step["step_result_chars"],
                submit["receipt_max_chars"],
                submit["merge_summary_chars"],
                submit["final_step_chars"],
                submit["status_chars"],
            )
            // TOKEN_CHARS,
            "growth": _growth(base, [int(n) for n in args.growth.split(",") if n]),
            "benchmark_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
        if args.baseline is not None:  # the submit and merge phase on the other checkout, right after
            shutil.rmtree(base / "artifacts-run-baseline", ignore_errors=True)
            theirs = _review_only(args.baseline, base / "run-baseline.toml", f"max_packets_per_run = {args.packets}\n")
            where = (str(root), str(base / "artifacts-run-baseline"), str(theirs))
            _child(_FIRST_STEP, *where, checkout=args.baseline)
            out["baseline_run_of_packets"] = _child(_SUBMIT_AND_MERGE, *where, checkout=args.baseline)
        print(json.dumps(out, indent=2))
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
