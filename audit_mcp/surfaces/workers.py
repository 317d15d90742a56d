"""Worker processes of ``audit-mcp run``: the command template, the environment, launching and reaping.

A worker is one shell command per packet, from the operator's ``--worker`` template with the packet's
values filled in (shell-quoted) and also set as ``AUDIT_MCP_*`` environment variables. It runs in an empty
folder outside the repository (the root is ``{root}``), in its own process group (so a timeout or an
interrupt kills everything it started), with its stdout and stderr appended to
``runs/<run_id>/workers/<packet_id>.stdout|.stderr``.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

# How a worker hands its results back: it runs `audit-mcp submit-packet`, or only writes its results file.
WorkerMode = Literal["submit", "file"]
WORKER_MODES: tuple[WorkerMode, ...] = ("submit", "file")

FIELDS = ("prompt_path", "run_id", "packet_id", "root", "artifacts_dir", "dispatch_plan", "results_path")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(FIELDS) + r")\}")
_TAIL_CHARS = 4000
_POLL_SECONDS = 0.05
_STAMP = "--- audit-mcp: worker started"


def fill_template(template: str, values: Mapping[str, str]) -> str:
    """The worker command: each ``{field}`` replaced by its shell-quoted value; other braces untouched."""
    return _PLACEHOLDER.sub(lambda m: shlex.quote(values[m.group(1)]), template)


def worker_env(values: Mapping[str, str], artifacts_dir: Path, base: Mapping[str, str]) -> dict[str, str]:
    env = dict(base)
    env.update({f"AUDIT_MCP_{name.upper()}": values[name] for name in FIELDS if name in values})
    env["AUDIT_MCP_ARTIFACTS_DIR"] = str(artifacts_dir)
    return env


@dataclass
class Worker:
    packet_id: str
    process: subprocess.Popen[bytes]
    started: float
    stdout: Path
    stderr: Path
    handles: tuple[Any, Any]
    wall_start: datetime = field(default_factory=lambda: datetime.now(UTC))  # for the run ledger

    def seconds(self) -> float:
        return time.monotonic() - self.started


def launch(command: str, packet_id: str, logs: Path, cwd: Path, env: Mapping[str, str]) -> Worker:
    """Start one worker, its output appended to its two log files under ``logs``."""
    logs.mkdir(parents=True, exist_ok=True)
    out_path, err_path = logs / f"{packet_id}.stdout", logs / f"{packet_id}.stderr"
    out, err = out_path.open("ab"), err_path.open("ab")
    stamp = f"{_STAMP} {datetime.now(UTC).isoformat(timespec='seconds')} ---\n".encode()
    for handle in (out, err):
        handle.write(stamp)
        handle.flush()
    # The template is the operator's own command line (from --worker), so it runs through the shell.
    process = subprocess.Popen(
        command,
        shell=True,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=err,
        env=dict(env),
        start_new_session=True,
    )
    return Worker(packet_id, process, time.monotonic(), out_path, err_path, (out, err))


def reap(running: list[Worker], timeout: float) -> list[tuple[Worker, bool]]:
    """The workers that ended (or ran past ``timeout`` and were killed), removed from ``running``."""
    finished = []
    for worker in list(running):
        timed_out = False
        if worker.process.poll() is None:
            if worker.seconds() < timeout:
                continue
            stop(worker)
            timed_out = True
        running.remove(worker)
        for handle in worker.handles:
            handle.close()
        finished.append((worker, timed_out))
    return finished


def wait_a_little(worker: Worker) -> None:
    """Block briefly on one running worker, so the loop neither spins nor misses another's exit for long."""
    try:
        worker.process.wait(timeout=_POLL_SECONDS)
    except subprocess.TimeoutExpired:
        return


def stop(worker: Worker) -> None:
    if worker.process.poll() is not None:
        return
    try:
        os.killpg(worker.process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    worker.process.wait()


def tail(path: Path) -> str:
    """The end of a worker's log, without the start stamps."""
    text = path.read_bytes()[-_TAIL_CHARS:].decode("utf-8", errors="replace")
    lines = [line for line in text.splitlines() if not line.startswith(_STAMP)]
    return "\n".join(lines).strip()


def current_output(path: Path) -> str:
    """What a worker printed since its latest start stamp (a resumed run appends to the same log)."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    at = text.rfind(_STAMP)
    if at >= 0:
        newline = text.find("\n", at)
        text = text[newline + 1 :] if newline >= 0 else ""
    return text
