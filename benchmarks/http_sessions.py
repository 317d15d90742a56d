"""Memory of the HTTP server under abandoned sessions: clients that initialize a session and never come back.

Starts ``audit-mcp serve --http`` on a loopback port twice, side by side in one run: with the shipped session
limits (an idle timeout and a cap on open sessions) and with both set out of reach (what a server without
them does). Each time it opens N sessions that never send DELETE, then reports the server's resident memory
(VmRSS, Linux) before and after, how many sessions were admitted, and how many were refused past the cap.

    python benchmarks/http_sessions.py --sessions 2200

The bundled fixture is copied to a temporary directory, so nothing is written into the tree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "planted_app"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "walks-away", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc: this benchmark needs Linux")


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before listening")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError("the server did not listen within 60 s")


def measure(root: Path, sessions: int, extra: list[str]) -> dict[str, object]:
    port = _free_port()
    argv = [sys.executable, "-m", "audit_mcp", "serve", "--http", "--port", str(port), "--root", str(root), *extra]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_listening(port, proc)
        statuses: dict[int, int] = {}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            client.post("/mcp", content=json.dumps(INITIALIZE), headers=HEADERS)  # warm up imports and caches
            before = _rss_mb(proc.pid)
            started = time.perf_counter()
            for _ in range(sessions):
                code = client.post("/mcp", content=json.dumps(INITIALIZE), headers=HEADERS).status_code
                statuses[code] = statuses.get(code, 0) + 1
            seconds = time.perf_counter() - started
        time.sleep(1)
        after = _rss_mb(proc.pid)
        return {
            "rss_before_mb": round(before, 1),
            "rss_after_mb": round(after, 1),
            "statuses": statuses,
            "seconds": round(seconds, 1),
        }
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2200, help="abandoned sessions to open (default 2200)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "planted_app"
        shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns(".audit-mcp"))
        env_note = f"load average {os.getloadavg()[0]:.1f}"
        runs = {
            "shipped limits (idle 600 s, at most 1,000 open)": [],
            "limits out of reach (idle 10^7 s, 10^7 open)": [
                "--session-idle-timeout",
                "10000000",
                "--max-sessions",
                "10000000",
            ],
        }
        print(f"{args.sessions} abandoned sessions each ({env_note})")
        for name, extra in runs.items():
            result = measure(root, args.sessions, extra)
            print(f"{name}: {json.dumps(result)}")


if __name__ == "__main__":
    main()
