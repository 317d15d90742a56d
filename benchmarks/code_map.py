"""The code map's cost: intake (CPU, wall, peak memory, what the map found) and the first ``next-step``
through the command line against reading every tracked byte, on any git repository, this checkout and
another side by side in the same run.

    python benchmarks/code_map.py REPO [--baseline CHECKOUT] [--rounds 3] [--second-audit] [--store URL]

REPO is read only (artifacts go to a temporary folder). Rounds interleave the two checkouts, each in a fresh
interpreter, so load affects both alike; each round starts with ``git ls-files -z | xargs -0 cat`` (the raw
read) and every ratio is against the read of its own round. Runs are review runs only (``context_pass`` and
``verification_pass`` off, for a checkout that has them). Prints one JSON document.

With ``--second-audit``, each round also measures a second audit of the same checkout in the same artifacts
directory, as a re-audit, an incremental audit or a pull request's audit that restored the artifacts starts:
the first audit is abandoned (``audit-mcp abandon``), then ``next-step --new-audit`` is timed as the first
step is; and the database's size after each (``audit.sqlite3`` once the command has exited). With
``--store URL`` (a PostgreSQL database), the steps keep their audits there instead, under an audit name of
their own per checkout and round (a schema each); the database's size is then not measured.
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

_INTAKE = """
import json, resource, sys, time
from pathlib import Path
from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.intake import build_manifest
root, artifacts = Path(sys.argv[1]), Path(sys.argv[2])
c, w = time.process_time(), time.perf_counter()
manifest = build_manifest(root, artifacts, SessionConfig())
cpu, wall = time.process_time() - c, time.perf_counter() - w
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
found = getattr(manifest, "code_map", None)
edges = found.edges if found is not None else manifest.edges
print(json.dumps({
    "cpu_seconds": cpu + kids.ru_utime + kids.ru_stime, "seconds": wall,
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "children_peak_rss_mb": kids.ru_maxrss / 1024, "processes": manifest.processes,
    "files": len(manifest.files), "in_scope": len(manifest.in_scope),
    "bytes_in_scope": sum(f.size for f in manifest.in_scope), "edges": len(edges),
    "links": sum(len(e.links) for e in edges) if found is not None else len(edges),
    "entry_points": len(found.entries) if found is not None else 0}))
"""


def _config(checkout: Path, where: Path) -> Path:
    known = (checkout / "audit_mcp" / "core" / "config.py").read_text()
    where.write_text("".join(f"{k} = false\n" for k in ("context_pass", "verification_pass") if k in known))
    return where


def _read(repo: Path) -> float:
    t0 = time.perf_counter()
    # A tracked entry that is not a file (a submodule's folder) is not read; cat says so, and goes on.
    subprocess.run(
        "git ls-files -z | xargs -0 cat > /dev/null", shell=True, cwd=repo, check=False, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - t0


def _env(checkout: Path, state: Path, store: tuple[str, str] | None = None) -> dict[str, str]:
    shared = {"AUDIT_MCP_STORE": store[0], "AUDIT_MCP_AUDIT_NAME": store[1]} if store else {}
    return {**os.environ, "PYTHONPATH": str(checkout), "AUDIT_MCP_STATE_DIR": str(state), **shared}


def _intake(checkout: Path, repo: Path, scratch: Path) -> dict[str, Any]:
    artifacts = scratch / "intake-artifacts"
    shutil.rmtree(artifacts, ignore_errors=True)
    proc = subprocess.run(
        [sys.executable, "-c", _INTAKE, str(repo), str(artifacts)],
        capture_output=True,
        text=True,
        check=False,
        cwd=checkout,
        env=_env(checkout, scratch / "state"),
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _first_step(
    checkout: Path, repo: Path, scratch: Path, *, again: bool = False, store: tuple[str, str] | None = None
) -> dict[str, Any]:
    """The first next-step through the command line (process start included): wall and CPU seconds (the
    copies that read slices of the files included), and the peak memory of the command's own process (GNU
    ``time``'s maximum resident set size). With ``again``: the first audit in the artifacts is abandoned, and
    the step that starts a second one is measured."""
    artifacts = scratch / "cli-artifacts"
    if again:
        abandon = [sys.executable, "-m", "audit_mcp", "abandon", "--root", str(repo), "--artifacts-dir", str(artifacts)]
        subprocess.run(
            [*abandon, "--reason", "benchmark"],
            capture_output=True,
            check=True,
            cwd=checkout,
            env=_env(checkout, scratch / "state", store),
        )
    else:
        shutil.rmtree(artifacts, ignore_errors=True)
    config = _config(checkout, scratch / "first.toml")
    peak_file = scratch / "peak.txt"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    argv = [sys.executable, "-m", "audit_mcp", "next-step", "--root", str(repo), "--artifacts-dir", str(artifacts)]
    argv += ["--config", str(config), "--host-can-dispatch-subagents", "true", *(["--new-audit"] if again else [])]
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%M", "-o", str(peak_file), *argv],
        capture_output=True,
        text=True,
        check=False,
        cwd=checkout,
        env=_env(checkout, scratch / "state", store),
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    step = json.loads(proc.stdout)
    return {
        "seconds": round(wall, 3),
        "cpu_seconds": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3),
        "peak_rss_mb": round(int(peak_file.read_text().split()[-1]) / 1024, 1),
        "step_kind": step["step_kind"],
        "db_mb": None if store else round(sum(f.stat().st_size for f in artifacts.glob("audit.sqlite3*")) / 1e6, 2),
    }


def _code_bytes(repo: Path) -> int:
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=repo, check=True, capture_output=True).stdout
    return sum((repo / name).stat().st_size for name in listing.decode().split("\0") if (repo / name).is_file())


def _machine() -> dict[str, str]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {"nproc": str(os.cpu_count()), "cpu": cpu, "python": platform.python_version()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", type=Path, help="a git repository (read only)")
    parser.add_argument("--baseline", type=Path, help="another checkout to run side by side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--second-audit", action="store_true", help="also time a second audit of the checkout")
    parser.add_argument("--store", help="a PostgreSQL URL for the steps' audits (a schema per checkout and round)")
    args = parser.parse_args()
    repo = args.repo.resolve()
    checkouts = {"this": HERE.parent, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    _read(repo)  # warm the page cache for every side alike
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in checkouts}
    with tempfile.TemporaryDirectory(prefix="audit-mcp-code-map-") as tmp:
        for n in range(args.rounds):
            for name, checkout in checkouts.items():
                scratch = Path(tmp) / name
                scratch.mkdir(exist_ok=True)
                read = _read(repo)
                store = (args.store, f"code-map-{name}-{n}-{os.getpid()}") if args.store else None
                first = _first_step(checkout, repo, scratch, store=store)
                second = _first_step(checkout, repo, scratch, again=True, store=store) if args.second_audit else None
                rounds[name].append(
                    {
                        "read_seconds": round(read, 3),
                        "first_step": first,
                        **({"second_audit_step": second} if second is not None else {}),
                        "cli_ratio": round(first["seconds"] / read, 2),
                        "intake": _intake(checkout, repo, scratch),
                        "load_average": os.getloadavg()[0],
                    }
                )
    out: dict[str, Any] = {"repo": str(repo), "machine": _machine(), "rounds": rounds}
    for name, found in rounds.items():
        out[name] = {
            "intake_cpu_seconds_median": round(statistics.median(r["intake"]["cpu_seconds"] for r in found), 3),
            "intake_seconds_median": round(statistics.median(r["intake"]["seconds"] for r in found), 3),
            "intake_peak_rss_mb_max": round(max(r["intake"]["peak_rss_mb"] for r in found), 1),
            "first_step_seconds_median": round(statistics.median(r["first_step"]["seconds"] for r in found), 3),
            "cli_ratio_median": round(statistics.median(r["cli_ratio"] for r in found), 2),
            "first_step_peak_rss_mb_max": max(r["first_step"]["peak_rss_mb"] for r in found),
            "first_step_cpu_seconds_median": round(statistics.median(r["first_step"]["cpu_seconds"] for r in found), 3),
            "db_mb_after_first_step": found[-1]["first_step"]["db_mb"],
        }
        if args.second_audit:
            again = [r["second_audit_step"] for r in found]
            out[name] |= {
                "second_audit_cpu_seconds_median": round(statistics.median(a["cpu_seconds"] for a in again), 3),
                "second_audit_seconds_median": round(statistics.median(a["seconds"] for a in again), 3),
                "second_audit_peak_rss_mb_max": max(a["peak_rss_mb"] for a in again),
                "db_mb_after_second_audit": again[-1]["db_mb"],
            }
    if args.baseline:
        out["first_step_vs_baseline"] = round(
            out["this"]["first_step_seconds_median"] / out["baseline"]["first_step_seconds_median"], 2
        )
    out["code_mb"] = round(_code_bytes(repo) / 1e6, 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
