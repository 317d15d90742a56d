"""The first ``next_step`` through the MCP server over stdio, as a host calls it: intake, planning and the
first dispatch of an empty audit, timed at the client from the call to its result, with intake read in
parts (``intake_processes`` unset: the server's helper reads every slice but the server's own) and in one
process (``intake_processes = 1``), alternating, each in a fresh server, artifacts directory and learned
state.

``python benchmarks/server_first_step.py --repo DIR [--rounds N]`` prints JSON: the wall seconds of each
round and side, the read of every tracked byte (``git ls-files -z | xargs -0 cat``) before each round, and
each side's ratio to it. Runs are review runs only (``context_pass`` and ``verification_pass`` off).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

HERE = Path(__file__).resolve().parent


def _read_every_byte(repo: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        "git ls-files -z | xargs -0 cat > /dev/null", shell=True, cwd=repo, check=True, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - start


async def _first_step(repo: Path, work: Path, keys: str) -> float:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    config = work / "config.toml"
    config.write_text("context_pass = false\nverification_pass = false\n" + keys)
    env = {"AUDIT_MCP_STATE_DIR": str(work / "learned-state"), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    serve = ["serve", "--root", str(repo), "--artifacts-dir", str(work / "art"), "--config", str(config)]
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "audit_mcp", *serve],
        env=env,
        cwd=str(HERE.parent),
    )
    async with Client(params) as client:
        start = time.perf_counter()
        result = await client.call_tool("next_step", {"host_can_dispatch_subagents": True})
        seconds = time.perf_counter() - start
        step = result.structured_content or {}
        if step.get("step_kind") != "dispatch_review":
            raise SystemExit(f"expected a dispatch, got {step.get('step_kind')}: {step.get('message')}")
    return seconds


async def _main(repo: Path, rounds: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="audit-mcp-server-step-"))
    sides = {"in_parts": "", "one_process": "intake_processes = 1\n"}
    samples: list[dict[str, Any]] = []
    try:
        _read_every_byte(repo)  # warm the page cache for both sides alike
        for n in range(rounds):
            read = min(_read_every_byte(repo) for _ in range(2))
            sample: dict[str, Any] = {"read_seconds": round(read, 3), "load_average": round(os.getloadavg()[0], 2)}
            order = list(sides) if n % 2 == 0 else list(reversed(sides))
            for side in order:
                seconds = await _first_step(repo, work / side, sides[side])
                sample[side + "_seconds"] = round(seconds, 3)
                sample[side + "_ratio"] = round(seconds / read, 2)
            samples.append(sample)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratio = [s["in_parts_seconds"] / s["one_process_seconds"] for s in samples]
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU, Python {platform.python_version()}",
        "repo": str(repo),
        "rounds": samples,
        "in_parts_over_one_process_median": round(statistics.median(ratio), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="a git repository (scale.py --keep makes one)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(anyio.run(_main, args.repo.resolve(), args.rounds), indent=2))


if __name__ == "__main__":
    main()
