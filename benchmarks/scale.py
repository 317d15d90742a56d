"""Scale benchmark: the first next_step on a generated 20,000-file git repository, against reading every
tracked byte in the same run; peak memory; submit_packet p50/p99 and merge_and_ingest with 10,000 tasks;
the size of every tool result.

    python benchmarks/scale.py [--files 20000] [--keep DIR]

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

_PY = '''"""Module {n}: request handling for area {area}."""

import json
from {sibling} import helper_{sib}


def handle_{n}(request, store):
    """Read the request body, look the user up and answer."""
    body = json.loads(request.body)
    user = store.get(body["user_id"])
    if user is None:
        return {{"status": 404}}
    total = 0
    for item in body.get("items", []):
        total += int(item["price"]) * int(item.get("count", 1))
    return {{"status": 200, "user": user["name"], "total": total, "helper": helper_{sib}(total)}}


def helper_{n}(value):
    return value * {n} % 97


class Cache{n}:
    def __init__(self):
        self.items = {{}}

    def get(self, key):
        return self.items.get(key)

    def put(self, key, value):
        self.items[key] = value
'''

_JS = """// Module {n}: client helpers for area {area}.
const api = require("./{sibling}");

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

module.exports = {{ render{n}, load{n}, api }};
"""


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=b@example.com", "-c", "user.name=bench", "-c", "init.defaultBranch=main", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def generate(root: Path, files: int) -> None:
    """``files`` source files in two halves (``a/``, ``b/``), 100 per directory, Python and JavaScript."""
    for n in range(files):
        half = "a" if n < files // 2 else "b"
        area = n // 100
        folder = root / half / f"area{area:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        sib = n - 1 if n % 100 else n + 1
        if n % 4 == 3:
            (folder / f"m{n}.js").write_text(_JS.format(n=n, area=area, sibling=f"m{sib}"))
        else:
            (folder / f"m{n}.py").write_text(_PY.format(n=n, area=area, sibling=f"m{sib}", sib=sib))
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "generated")


def _child(code: str, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False, cwd=HERE.parent
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
t0 = time.perf_counter()
service = AuditService(root, artifacts, config_path=config)
step = service.next_step({"can_dispatch_subagents": True})
seconds = time.perf_counter() - t0
plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
print(json.dumps({"seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "step_kind": step.step_kind, "packets": len(plan["packets"]),
                  "tasks": sum(len(p["tasks"]) for p in plan["packets"]),
                  "step_result_chars": len(step.model_dump_json()),
                  "plan_file_chars": len(Path(step.artifact_paths["plan"]).read_text())}))
"""

_SUBMIT_AND_MERGE = """
import json, resource, sys, time
from pathlib import Path
from audit_mcp.usecases.service import AuditService
root, artifacts, config = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
service = AuditService(root, artifacts, config_path=config)
step = service.next_step()
plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
times, receipt_chars = [], 0
for packet in plan["packets"]:
    results = [{"task_id": t["task_id"], "status": "reviewed", "findings": [],
                "summary": f"Read {t['file']} lines {t['start_line']}-{t['end_line']} under {t['lens']}: the "
                           "request body is parsed, looked up and summed; no injection, no unchecked input."}
               for t in packet["tasks"]]
    t0 = time.perf_counter()
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
    times.append(time.perf_counter() - t0)
    assert receipt.accepted, receipt.errors
    receipt_chars = max(receipt_chars, len(receipt.model_dump_json()))
t0 = time.perf_counter()
summary = service.merge_and_ingest(plan["run_id"], [])
merge_seconds = time.perf_counter() - t0
t0 = time.perf_counter()
final = service.next_step()
final_seconds = time.perf_counter() - t0
times.sort()
print(json.dumps({
    "tasks": sum(len(p["tasks"]) for p in plan["packets"]), "packets": len(plan["packets"]),
    "submit_p50_ms": 1000 * times[len(times) // 2], "submit_p99_ms": 1000 * times[min(len(times) - 1,
                                                                                      int(len(times) * 0.99))],
    "submit_max_ms": 1000 * times[-1], "merge_seconds": merge_seconds, "merge_covered": summary.tasks_covered,
    "synthesis_next_step_seconds": final_seconds, "final_step": final.step_kind,
    "receipt_max_chars": receipt_chars, "merge_summary_chars": len(summary.model_dump_json()),
    "final_step_chars": len(final.model_dump_json()),
    "status_chars": len(service.status().model_dump_json()),
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _read_all_bytes(root: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run("git ls-files -z | xargs -0 cat > /dev/null", shell=True, cwd=root, check=True)
    return time.perf_counter() - t0


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--keep", type=Path, help="generate the repository here and keep it")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="audit-mcp-scale-"))
    root = base / "repo"
    try:
        t0 = time.perf_counter()
        if not root.exists():
            root.mkdir(parents=True)
            generate(root, args.files)
        generated = time.perf_counter() - t0
        _read_all_bytes(root)  # warm the page cache for both sides alike
        baseline = min(_read_all_bytes(root) for _ in range(3))
        for old in ("artifacts-full", "artifacts-10k"):
            shutil.rmtree(base / old, ignore_errors=True)
        first = _child(_FIRST_STEP, str(root), str(base / "artifacts-full"))
        half = base / "half.toml"
        half.write_text('lenses = ["security"]\ninclude = ["a/**"]\nmax_packets_per_run = 2000\n')
        _child(_FIRST_STEP, str(root), str(base / "artifacts-10k"), str(half))
        submit = _child(_SUBMIT_AND_MERGE, str(root), str(base / "artifacts-10k"), str(half))
        out = {
            "machine": _machine(),
            "files": args.files,
            "generate_seconds": round(generated, 2),
            "read_all_bytes_seconds": round(baseline, 3),
            "first_next_step": first,
            "first_next_step_ratio": round(first["seconds"] / baseline, 2),
            "ten_thousand_tasks": submit,
            "largest_tool_result_tokens": max(
                first["step_result_chars"],
                submit["receipt_max_chars"],
                submit["merge_summary_chars"],
                submit["final_step_chars"],
                submit["status_chars"],
            )
            // TOKEN_CHARS,
            "benchmark_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
        print(json.dumps(out, indent=2))
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
