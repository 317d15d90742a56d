"""The multi-host benchmark: makespan of one audit with 1, 2 and 4 host processes on a throwaway PostgreSQL
server, and submit_packet latency on PostgreSQL beside SQLite. Run with ``python -m benchmarks.multi_host bench``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from audit_mcp.usecases.service import AuditService
from benchmarks.multi_host import _results, checkout, host_config, make_repo
from tests.pg_server import PgServer, pg_bindir

ROOT = Path(__file__).resolve().parent.parent
FILES = 96
REVIEWERS = 8


def _database(server: PgServer) -> str:
    name = "b_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server.dsn(name)


def makespan(server: PgServer, hosts: int, work: Path, review_seconds: float) -> dict[str, Any]:
    url = _database(server)
    origin = make_repo(work / f"origin-{hosts}", FILES)
    roots = [checkout(origin, work / f"h{hosts}-{n}" / "app", lease_seconds=600) for n in range(hosts)]
    env = {**os.environ, "AUDIT_MCP_STATE_DIR": str(work / "learned")}
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "benchmarks.multi_host", "host", str(r), url, str(REVIEWERS), str(review_seconds)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for r in roots
    ]
    events: list[dict[str, Any]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(err)
        events += [json.loads(line) for line in out.splitlines()]
    total = time.perf_counter() - started
    handed = [e["at"] for e in events if e["event"] == "handed"]
    accepted = [e["at"] for e in events if e["event"] == "accepted"]
    return {
        "hosts": hosts,
        "makespan_seconds": round(total, 2),
        # From the first packet handed out to the last accepted: the part more hosts can share.
        "review_phase_seconds": round(max(accepted) - min(handed), 2),
        "packets": len(accepted),
    }


def submit_latency(store: str | None, work: Path) -> dict[str, Any]:
    origin = make_repo(work / f"lat-{uuid.uuid4().hex[:6]}", FILES)
    root = checkout(origin, origin.parent / (origin.name + "-co"), lease_seconds=600)
    # Review packets only: with the threat model's pass on, the first run is its one context packet.
    config = host_config(root)
    config.write_text("context_pass = false\nverification_pass = false\n" + config.read_text())
    service = AuditService(root, store=store, config_path=config)
    step = service.next_step({"can_dispatch_subagents": True, "max_active_subagents": 200})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    times = []
    for packet in plan["packets"]:
        results = _results(packet)
        t0 = time.perf_counter()
        assert service.submit_packet(plan["run_id"], packet["packet_id"], results).accepted
        times.append((time.perf_counter() - t0) * 1000)
    service.store.close()
    times.sort()
    return {
        "store": "postgresql" if store else "sqlite",
        "submissions": len(times),
        "p50_ms": round(statistics.median(times), 2),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 2),
    }


def bench(review_seconds: float) -> dict[str, Any]:
    bindir = pg_bindir()
    if bindir is None:
        raise SystemExit("no PostgreSQL binaries (initdb, pg_ctl): apt-get install postgresql")
    server = PgServer(bindir).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            os.environ["AUDIT_MCP_STATE_DIR"] = str(work / "learned")
            runs = [makespan(server, n, work, review_seconds) for n in (1, 2, 4)]
            base, phase = runs[0]["makespan_seconds"], runs[0]["review_phase_seconds"]
            for r in runs:
                r["speedup"] = round(base / r["makespan_seconds"], 2)
                r["review_phase_speedup"] = round(phase / r["review_phase_seconds"], 2)
            latency = [submit_latency(None, work), submit_latency(_database(server), work)]
    finally:
        server.stop()
    return {
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU(s), "
        f"Python {platform.python_version()}",
        "files": FILES,
        "reviewers_per_host": REVIEWERS,
        "review_seconds": review_seconds,
        "makespan": runs,
        "submit_packet": latency,
    }
