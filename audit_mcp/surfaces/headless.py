"""Headless runs: the server launches its own review workers as subprocesses, for CI and hosts without subagents.

Each packet of a run gets one worker, started from a command template with the
packet's prompt path, run id, packet id, root and dispatch-plan path filled in
(shell-quoted) and also set as ``AUDIT_MCP_*`` environment variables. Workers
submit through ``audit-mcp submit-packet``. At most ``wave_size`` workers run
at once (a sliding window: a finished worker's slot is refilled at once, but
no packet starts before its ``not_before_seconds`` in the plan); a
worker that fails rate-limited halves the window for the rest of the run, and
its error text is handed to ``merge_and_ingest`` so the scheduler sets a
cooldown, which the next run waits out (or stops at, past ``max_wait``).
An interrupted run resumes: the open run's unsubmitted packets are relaunched.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from audit_mcp.core.errors import ConfigError
from audit_mcp.core.models import Step
from audit_mcp.scheduling.failures import classify
from audit_mcp.usecases.service import AuditService

EXIT_COMPLETE, EXIT_PARTIAL, EXIT_BLOCKED = 0, 3, 4
CLIENT_NAME = "audit-mcp-run"
_FIELDS = ("prompt_path", "run_id", "packet_id", "root", "dispatch_plan")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(_FIELDS) + r")\}")
_TAIL_CHARS = 4000
_POLL_SECONDS = 0.05

Say = Callable[[str], None]
Sleep = Callable[[float], None]


def fill_template(template: str, values: Mapping[str, str]) -> str:
    """The worker command: each ``{field}`` replaced by its shell-quoted value; other braces untouched."""
    return _PLACEHOLDER.sub(lambda m: shlex.quote(values[m.group(1)]), template)


def worker_env(values: Mapping[str, str], artifacts_dir: Path, base: Mapping[str, str]) -> dict[str, str]:
    env = dict(base)
    env.update({f"AUDIT_MCP_{name.upper()}": values[name] for name in _FIELDS})
    env["AUDIT_MCP_ARTIFACTS_DIR"] = str(artifacts_dir)
    return env


@dataclass
class _Worker:
    packet_id: str
    process: subprocess.Popen[bytes]
    started: float
    stdout: Path
    stderr: Path
    handles: tuple[Any, Any]


@dataclass
class HeadlessResult:
    exit_code: int
    outcome: str
    message: str
    step: Step | None
    report_path: Path | None = None
    report_json_path: Path | None = None
    runs: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)


class HeadlessRunner:
    def __init__(
        self,
        service: AuditService,
        template: str,
        *,
        max_workers: int = 4,
        timeout: float = 1800.0,
        max_wait: float = 900.0,
        model: str | None = None,
        say: Say = lambda _line: None,
        sleep: Sleep = time.sleep,  # only for rate-limit cooldowns
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not template.strip():
            raise ConfigError("--worker needs a command template, e.g. 'claude -p \"Read and follow {prompt_path}\"'")
        if not 1 <= max_workers <= 64:
            raise ConfigError("--max-workers must be between 1 and 64")
        if timeout <= 0:
            raise ConfigError("--timeout must be a positive number of seconds")
        self.service = service
        self.template = template
        self.max_workers = max_workers
        self.timeout = timeout
        self.max_wait = max_wait
        self.model = model
        self.say = say
        self.sleep = sleep
        self.env = dict(os.environ if env is None else env)

    def run(self) -> HeadlessResult:
        caps: dict[str, Any] = {
            "can_dispatch_subagents": True,
            "max_active_subagents": self.max_workers,
            "model": self.model,
        }
        step = self.service.next_step(caps, client_name=CLIENT_NAME)
        result = HeadlessResult(EXIT_PARTIAL, "partial", "", step)
        while step.step_kind in ("dispatch_review", "single_task_fallback") and step.run_id:
            plan = json.loads(self.service.plan_path(step.run_id).read_text(encoding="utf-8"))
            wait = self._cooldown_seconds(plan)
            if wait > self.max_wait:
                result.message = (
                    f"rate-limited: the scheduler's cooldown ends in {wait:.0f}s, past --max-wait "
                    f"{self.max_wait:.0f}s; run the same command again later to resume"
                )
                result.step = step
                return result
            if wait > 0:
                self.say(f"cooling down {wait:.0f}s after rate-limit errors")
                self.sleep(wait)
            result.runs.append(step.run_id)
            failures = self._run_packets(step.run_id, plan)
            result.failures.update(failures)
            summary = self.service.merge_and_ingest(
                step.run_id, [{"packet_id": p, "error": e} for p, e in failures.items()], actor="headless"
            )
            self.say(
                f"run {step.run_id} merged: {summary.tasks_covered} task(s) covered, {summary.packets_failed} "
                f"packet(s) failed, completeness {summary.completeness}"
            )
            step = self.service.next_step(caps, client_name=CLIENT_NAME)
        result.step = step
        if step.step_kind == "present_report":
            result.report_path = self.service.report_md_path
            result.report_json_path = self.service.report_json_path
            complete = step.completeness == "complete"
            result.exit_code = EXIT_COMPLETE if complete else EXIT_PARTIAL
            result.outcome = "complete" if complete else "partial"
            result.message = (
                "every task was reviewed"
                if complete
                else "some tasks could not be reviewed; the report names every gap"
            )
        elif step.step_kind == "blocked":
            result.exit_code, result.outcome, result.message = EXIT_BLOCKED, "blocked", step.reason
        else:
            result.message = f"stopped at a {step.step_kind} step: {step.reason}"
        return result

    # one run -------------------------------------------------------------------------------
    def _cooldown_seconds(self, plan: Mapping[str, Any]) -> float:
        live = self.service.active_cooldown()
        moments = [m for m in (plan.get("cooldown_until"), live) if m]
        if not moments:
            return 0.0
        until = max(datetime.fromisoformat(m.replace("Z", "+00:00")) for m in moments)
        return max(0.0, (until - datetime.now(UTC)).total_seconds())

    def _submitted(self, run_id: str) -> set[str]:
        return self.service.submitted_packets(run_id)

    def _run_packets(self, run_id: str, plan: Mapping[str, Any]) -> dict[str, str]:
        done = self._submitted(run_id)
        queue = [p for p in plan["packets"] if p["packet_id"] not in done]
        if done:
            self.say(f"run {run_id}: resuming; {len(done)} packet(s) already submitted, {len(queue)} to go")
        window = max(1, min(int(plan.get("wave_size") or 1), self.max_workers))
        self.say(f"run {run_id}: {len(queue)} packet(s), up to {window} worker(s) at a time")
        # Launch pacing: a packet starts no sooner than its not_before_seconds after the first start (counted
        # from the first outstanding packet when the run resumes).
        base = min((float(p.get("not_before_seconds") or 0.0) for p in queue), default=0.0)
        first_start: float | None = None
        running: list[_Worker] = []
        failures: dict[str, str] = {}
        try:
            while queue or running:
                due = 0.0
                while queue and len(running) < window:
                    if first_start is not None:
                        offset = float(queue[0].get("not_before_seconds") or 0.0) - base
                        due = first_start + offset - time.monotonic()
                        if due > 0:
                            break
                    running.append(self._launch(run_id, queue.pop(0)))
                    first_start = time.monotonic() if first_start is None else first_start
                if not running:
                    time.sleep(min(due, 1.0))  # only a paced launch is waiting
                    continue
                finished = self._reap(running)
                if not finished:
                    _wait_a_little(running[0])
                    continue
                for worker, timed_out in finished:
                    error = self._outcome(run_id, worker, timed_out)
                    if error is None:
                        self.say(f"  {worker.packet_id}: submitted")
                        continue
                    failures[worker.packet_id] = error
                    kind = classify(error).kind
                    self.say(f"  {worker.packet_id}: failed ({kind}); output in {worker.stderr}")
                    if kind == "rate_limited" and window > 1:
                        window = max(1, window // 2)
                        self.say(f"  rate-limited: at most {window} worker(s) at a time for the rest of this run")
        finally:
            for worker in running:
                _stop(worker)
        return failures

    def _launch(self, run_id: str, packet: Mapping[str, Any]) -> _Worker:
        values = {
            "prompt_path": str(packet["prompt_path"]),
            "run_id": run_id,
            "packet_id": packet["packet_id"],
            "root": str(self.service.root),
            "dispatch_plan": str(self.service.plan_path(run_id)),
        }
        logs = self.service.run_dir(run_id) / "workers"
        logs.mkdir(parents=True, exist_ok=True)
        out_path, err_path = logs / f"{packet['packet_id']}.stdout", logs / f"{packet['packet_id']}.stderr"
        out, err = out_path.open("ab"), err_path.open("ab")
        stamp = f"--- audit-mcp: worker started {datetime.now(UTC).isoformat(timespec='seconds')} ---\n".encode()
        out.write(stamp)
        err.write(stamp)
        out.flush()
        err.flush()
        # The template is the operator's own command line (from --worker), so it runs through the shell.
        process = subprocess.Popen(
            fill_template(self.template, values),
            shell=True,
            cwd=self.service.root,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=worker_env(values, self.service.artifacts_dir, self.env),
            start_new_session=True,
        )
        self.say(f"  {packet['packet_id']}: worker started ({len(packet['tasks'])} task(s))")
        return _Worker(packet["packet_id"], process, time.monotonic(), out_path, err_path, (out, err))

    def _reap(self, running: list[_Worker]) -> list[tuple[_Worker, bool]]:
        finished = []
        for worker in list(running):
            timed_out = False
            if worker.process.poll() is None:
                if time.monotonic() - worker.started < self.timeout:
                    continue
                _stop(worker)
                timed_out = True
            running.remove(worker)
            for handle in worker.handles:
                handle.close()
            finished.append((worker, timed_out))
        return finished

    def _outcome(self, run_id: str, worker: _Worker, timed_out: bool) -> str | None:
        """None when the packet was submitted; else the error text to report for it."""
        if worker.packet_id in self._submitted(run_id):
            return None
        if timed_out:
            return f"the worker timed out after {self.timeout:.0f}s without submitting"
        code = worker.process.returncode
        tail = _tail(worker.stderr) or _tail(worker.stdout)
        return f"the worker exited with code {code} without submitting: {tail}".strip()


def _wait_a_little(worker: _Worker) -> None:
    """Block briefly on one running worker, so the loop neither spins nor misses another's exit for long."""
    try:
        worker.process.wait(timeout=_POLL_SECONDS)
    except subprocess.TimeoutExpired:
        return


def _stop(worker: _Worker) -> None:
    if worker.process.poll() is not None:
        return
    try:
        os.killpg(worker.process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    worker.process.wait()


def _tail(path: Path) -> str:
    text = path.read_bytes()[-_TAIL_CHARS:].decode("utf-8", errors="replace")
    lines = [line for line in text.splitlines() if not line.startswith("--- audit-mcp: worker started")]
    return "\n".join(lines).strip()


def interrupt_on_sigterm() -> None:
    """Treat SIGTERM like Ctrl-C, so a stopped run kills its workers; accepted work stays saved."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def print_result(result: HeadlessResult, out: TextIO) -> None:
    doc = {
        "outcome": result.outcome,
        "exit_code": result.exit_code,
        "message": result.message,
        "runs": result.runs,
        "failed_packets": result.failures,
        "report": str(result.report_path) if result.report_path else None,
        "report_json": str(result.report_json_path) if result.report_json_path else None,
        "step_kind": result.step.step_kind if result.step else None,
    }
    out.write(json.dumps(doc, indent=2) + "\n")
