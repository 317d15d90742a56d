"""A headless worker for tests: reviews its packet honestly from the fixture's answer key and submits
through the CLI, as a real worker would. Behaviour switches (environment):

- SCRIPTED_WORKER_STATE: a folder where it leaves `<packet_id>.started` / `.done` markers, and its working
  directory in `<packet_id>.cwd`;
- SCRIPTED_WORKER_429: part of a packet id; those packets fail with a provider's rate-limit text instead;
- SCRIPTED_WORKER_HANG_AFTER: hang (until `release` appears in the state folder, at most 30 s) once this
  many packets are done;
- SCRIPTED_WORKER_AUTH: every worker fails with an authentication error;
- SCRIPTED_WORKER_FILE_ONLY: write the results file (leaving `<packet_id>.written`) and exit 0, never submit;
- SCRIPTED_WORKER_DIE_AFTER_WRITE: part of a packet id; those workers write their file, then kill themselves;
- SCRIPTED_WORKER_HANG_AFTER_WRITE: part of a packet id; those write their file, leave `.written` (and write
  their packet id into `written.fifo` when the test made one), then hang (until `release`, at most 30 s)
  without submitting;
- SCRIPTED_WORKER_PRINTS=claude: after submitting, print Claude Code's `--output-format json` result (usage);
- SCRIPTED_WORKER_HEADERS: part of a packet id; those also quote rate-limit headers on stderr;
- SCRIPTED_WORKER_REJECTED: part of a packet id; those also print a stream-json rate-limit event of a rejected
  five-hour window that resets at SCRIPTED_WORKER_RESETS (epoch seconds);
- SCRIPTED_WORKER_BREAK: part of a packet id; those write a results file that fails validation (a finding
  whose evidence is not in the file) and exit 0 without submitting;
- SCRIPTED_WORKER_ECHO: a file of the repository (relative to its root) every worker prints on stderr, as a
  reviewer that quotes what it read; SCRIPTED_WORKER_ECHO_FAIL: part of a packet id; those print it and fail.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from audit_mcp.surfaces.demo import answer_key
from audit_mcp.surfaces.scripted import AnswerKeyReviewer


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
        (state / f"{args.packet}.cwd").write_text(str(Path.cwd()))
    if env.get("SCRIPTED_WORKER_AUTH"):
        print("Invalid API key · Please run /login", file=sys.stderr)
        return 1
    echo = (Path(args.root) / env["SCRIPTED_WORKER_ECHO"]).read_text() if env.get("SCRIPTED_WORKER_ECHO") else ""
    if echo and env.get("SCRIPTED_WORKER_ECHO_FAIL") and env["SCRIPTED_WORKER_ECHO_FAIL"] in args.packet:
        print(echo, file=sys.stderr)
        return 1
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
    results = Path(env["AUDIT_MCP_RESULTS_PATH"])  # its name carries a token sealed with the user's key
    assert results.parent == Path(env["AUDIT_MCP_ARTIFACTS_DIR"]) / "runs" / args.run / "results"
    assert results.name.startswith(f"{args.packet}.") and results.parent.is_dir()
    answer = AnswerKeyReviewer(answer_key(), decoys=False).results(packet)
    broken = env.get("SCRIPTED_WORKER_BREAK")
    if broken and broken in args.packet:
        answer[0]["findings"] = [
            {
                "title": "Invented",
                "severity": "low",
                "confidence": "low",
                "category": "made-up",
                "file": packet["tasks"][0]["file"],
                "start_line": 1,
                "end_line": 1,
                "evidence": "this line is in no file at all",
                "description": "It is not there.",
                "recommendation": "None.",
            }
        ]
    results.write_text(json.dumps(answer))
    if state:
        (state / f"{args.packet}.written").touch()
        fifo = state / "written.fifo"
        waited_for = env.get("SCRIPTED_WORKER_HANG_AFTER_WRITE")
        # A test waits on it for the file to be written: the packet that will hang, if one is named.
        if fifo.exists() and (not waited_for or waited_for in args.packet):
            with fifo.open("w") as handle:
                handle.write(args.packet)
    if env.get("SCRIPTED_WORKER_FILE_ONLY") or (broken and broken in args.packet):
        return 0
    if env.get("SCRIPTED_WORKER_DIE_AFTER_WRITE") and env["SCRIPTED_WORKER_DIE_AFTER_WRITE"] in args.packet:
        os.kill(os.getpid(), signal.SIGKILL)
    hang_after_write = env.get("SCRIPTED_WORKER_HANG_AFTER_WRITE")
    if state and hang_after_write and hang_after_write in args.packet:
        deadline = time.monotonic() + 30
        while not (state / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return 1
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
    _print_agent_output(args.packet, env)
    if echo:
        print(echo, file=sys.stderr)
    return 0


def _print_agent_output(packet: str, env: os._Environ[str]) -> None:
    """What a CLI agent prints when it finishes: its usage, and what it saw of the provider's rate limits."""
    if env.get("SCRIPTED_WORKER_PRINTS") == "claude":
        usage = {"input_tokens": 3120, "cache_creation_input_tokens": 18500, "cache_read_input_tokens": 215635}
        result = {"type": "result", "subtype": "success", "is_error": False, "duration_ms": 61998, "num_turns": 14}
        print(json.dumps({**result, "usage": {**usage, "output_tokens": 4106}, "total_cost_usd": 0.31}))
    if env.get("SCRIPTED_WORKER_HEADERS") and env["SCRIPTED_WORKER_HEADERS"] in packet:
        print("anthropic-ratelimit-input-tokens-limit: 450000", file=sys.stderr)
        print("anthropic-ratelimit-requests-limit: 1000", file=sys.stderr)
    if env.get("SCRIPTED_WORKER_REJECTED") and env["SCRIPTED_WORKER_REJECTED"] in packet:
        info = {"status": "rejected", "resetsAt": int(env["SCRIPTED_WORKER_RESETS"]), "rateLimitType": "five_hour"}
        print(json.dumps({"type": "rate_limit_event", "rate_limit_info": info}))


if __name__ == "__main__":
    sys.exit(main())
