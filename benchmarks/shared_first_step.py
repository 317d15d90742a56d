"""The first next_step on a shared PostgreSQL store, beside the same step on SQLite: intake, planning and
the first dispatch of an empty audit, each in a fresh process and a fresh database, this checkout and
(with ``--baseline``) another one alternating.

``python benchmarks/shared_first_step.py --repo DIR [--rounds N] [--baseline CHECKOUT]`` prints JSON: wall
seconds per round and side, on each store, after one run on PostgreSQL that is not counted (a server's
first audit pays for its cold caches). It starts its own PostgreSQL server on a temporary directory
and a loopback port (needs the server binaries, as the tests do). Runs are review runs only
(``context_pass`` and ``verification_pass`` off) with a learned state of their own.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import psycopg  # noqa: E402

from tests.pg_server import PgServer, pg_bindir  # noqa: E402

_STEP = r"""
import json, os, sys, tempfile, time
from pathlib import Path
os.environ["AUDIT_MCP_STATE_DIR"] = tempfile.mkdtemp()
if sys.argv[2] != "sqlite":
    os.environ["AUDIT_MCP_STORE"] = sys.argv[2]
from audit_mcp.usecases.service import AuditService
artifacts = Path(tempfile.mkdtemp()) / "artifacts"
t0 = time.perf_counter()
service = AuditService(Path(sys.argv[1]), artifacts, config_path=Path(sys.argv[3]))
step = service.next_step({"can_dispatch_subagents": True})
seconds = time.perf_counter() - t0
assert step.step_kind == "dispatch_review", step.step_kind
print(json.dumps({"seconds": seconds}))
"""


def _step(checkout: Path, repo: Path, store: str, config: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    proc = subprocess.run(
        [sys.executable, "-c", _STEP, str(repo), store, str(config)],
        env=env,
        cwd=checkout,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-4000:])
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["seconds"])


def _database(server: PgServer) -> str:
    name = "b_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server.dsn(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="a git repository to audit (it is only read)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout, timed alternately with this one")
    args = parser.parse_args()
    bindir = pg_bindir()
    if bindir is None:
        raise SystemExit("no PostgreSQL server binaries (initdb, pg_ctl) on this machine: apt-get install postgresql")
    sides = {"this": HERE.parent, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    config = Path(tempfile.mkdtemp()) / "review-only.toml"
    config.write_text("context_pass = false\nverification_pass = false\n")
    server = PgServer(bindir)
    server.start()
    results: dict[str, dict[str, list[float]]] = {side: {"postgresql": [], "sqlite": []} for side in sides}
    try:
        # The server's first database and first audit pay for its cold caches: one run, not counted.
        _step(HERE.parent, args.repo, _database(server), config)
        for _ in range(args.rounds):
            for side, checkout in sides.items():
                results[side]["postgresql"].append(round(_step(checkout, args.repo, _database(server), config), 3))
                results[side]["sqlite"].append(round(_step(checkout, args.repo, "sqlite", config), 3))
    finally:
        server.stop()
    out: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()[0]},
        "repo": str(args.repo),
        "seconds": results,
        "medians": {side: {k: statistics.median(v) for k, v in r.items()} for side, r in results.items()},
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
