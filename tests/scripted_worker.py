"""A headless worker for tests: reviews its packet honestly from the fixture's answer key and submits
through the CLI, as a real worker would. Behaviour switches (environment):

- SCRIPTED_WORKER_STATE: a folder where it leaves `<packet_id>.started` / `.done` markers;
- SCRIPTED_WORKER_429: part of a packet id; those packets fail with a provider's rate-limit text instead;
- SCRIPTED_WORKER_HANG_AFTER: hang (until `release` appears in the state folder, at most 30 s) once this
  many packets are done.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from audit_mcp.surfaces.demo import AnswerKeyReviewer, answer_key


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("--packet", "--run", "--plan", "--prompt", "--root"):
        parser.add_argument(name, required=True)
    args = parser.parse_args()
    env = os.environ
    expected = {
        "packet": "AUDIT_MCP_PACKET_ID",
        "run": "AUDIT_MCP_RUN_ID",
        "plan": "AUDIT_MCP_DISPATCH_PLAN",
        "prompt": "AUDIT_MCP_PROMPT_PATH",
        "root": "AUDIT_MCP_ROOT",
    }
    for arg, var in expected.items():
        if getattr(args, arg) != env.get(var):
            print(f"argument {arg}={getattr(args, arg)!r} differs from {var}={env.get(var)!r}", file=sys.stderr)
            return 2
    state = Path(env["SCRIPTED_WORKER_STATE"]) if env.get("SCRIPTED_WORKER_STATE") else None
    if state:
        (state / f"{args.packet}.started").touch()
    if env.get("SCRIPTED_WORKER_429") and env["SCRIPTED_WORKER_429"] in args.packet:
        print(
            "API Error: Request rejected (429) rate_limit_error: Number of request tokens has exceeded your "
            "per-minute rate limit. retry-after: 120",
            file=sys.stderr,
        )
        return 1
    hang_after = env.get("SCRIPTED_WORKER_HANG_AFTER")
    if state and hang_after is not None and len(list(state.glob("*.done"))) >= int(hang_after):
        deadline = time.monotonic() + 30
        while not (state / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return 1
    plan = json.loads(Path(args.plan).read_text())
    packet = next(p for p in plan["packets"] if p["packet_id"] == args.packet)
    assert Path(args.prompt).is_file() and packet["prompt_path"] == args.prompt
    results = Path(env["AUDIT_MCP_ARTIFACTS_DIR"]) / "runs" / args.run / "results" / f"{args.packet}.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(AnswerKeyReviewer(answer_key()).results(packet)))
    exe = str(Path(sys.executable).with_name("audit-mcp"))
    proc = subprocess.run(
        [
            exe,
            "submit-packet",
            "--root",
            args.root,
            "--artifacts-dir",
            env["AUDIT_MCP_ARTIFACTS_DIR"],
            "--run-id",
            args.run,
            "--packet-id",
            args.packet,
            "--results",
            str(results),
        ],
        capture_output=True,
        text=True,
    )
    print(proc.stdout)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return proc.returncode
    if state:
        (state / f"{args.packet}.done").touch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
