"""Headless runs: the server launches its own review workers as subprocesses, for CI and hosts without subagents.

Each packet of a run gets one worker (see ``workers``). In the default ``submit`` mode a worker submits
through ``audit-mcp submit-packet``; in ``file`` mode it only writes its results file (the packet prompt's
path, also ``{results_path}``), which the runner checks and records the moment the worker exits. Either
way a results file left by a worker that died after writing it counts: the work is kept, not redone.
At most ``wave_size`` workers run at once (a sliding window: a finished worker's slot is refilled at
once, but no packet starts before its ``not_before_seconds`` in the plan). Each time a worker finishes the
runner asks ``plan_status``, with the failures so far, for the width, the cooldown and the start times of
the packets not launched yet: the scheduler learns from each submission's usage and each failure as they
arrive, so a throttled run narrows (and waits out a cooldown) before its next launch, not only the next
run. A cooldown still in force when a run starts is waited out (or stopped at, past ``max_wait``).
A worker that did its packet is read too (``scheduling.worker_output``): the usage and rate-limit output
it printed goes to the merge, which learns from it as from a failed worker's text.
``quota_probe`` asks the provider about its limits before the first plan (``usecases.probing``).
``max_runs`` stops after that many review runs. An interrupted run resumes: the open
run's packets without recorded work are relaunched.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from audit_mcp.core.errors import ConfigError
from audit_mcp.core.models import Step
from audit_mcp.scheduling.failures import classify
from audit_mcp.scheduling.worker_output import WorkerReport, describe, read_worker_output
from audit_mcp.surfaces.workers import (
    WORKER_MODES,
    Worker,
    WorkerMode,
    current_output,
    fill_template,
    launch,
    reap,
    stop,
    tail,
    wait_a_little,
    worker_env,
)
from audit_mcp.usecases import reporting
from audit_mcp.usecases.probing import probe_before_run
from audit_mcp.usecases.service import AuditService

__all__ = ["HeadlessResult", "HeadlessRunner", "fill_template", "interrupt_on_sigterm", "print_result", "worker_env"]

EXIT_COMPLETE, EXIT_PARTIAL, EXIT_BLOCKED = 0, 3, 4
CLIENT_NAME = "audit-mcp-run"
_REFUSED_FILE = "the worker's results file"

Say = Callable[[str], None]
Sleep = Callable[[float], None]


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
        worker_mode: WorkerMode = "submit",
        since: str | None = None,
        new_audit: bool = False,
        max_runs: int | None = None,
        retry_blocked: bool = False,
        quota_probe: str | None = None,
        command: list[str] | None = None,
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
        if worker_mode not in WORKER_MODES:
            raise ConfigError(f"--worker-mode must be one of {', '.join(WORKER_MODES)}, not {worker_mode!r}")
        if max_runs is not None and max_runs < 1:
            raise ConfigError("--max-runs must be at least 1")
        self.service = service
        self.template = template
        self.max_workers = max_workers
        self.timeout = timeout
        self.max_wait = max_wait
        self.model = model
        self.worker_mode = worker_mode
        self.since = since
        self.new_audit = new_audit
        self.max_runs = max_runs
        self.retry_blocked = retry_blocked
        self.quota_probe = quota_probe
        self.command = command
        self.say = say
        self.sleep = sleep
        self.env = dict(os.environ if env is None else env)
        self._printed: dict[str, WorkerReport] = {}
        self.stopped: str | None = None  # why the current run launches nothing more
        self._cwd = Path(tempfile.gettempdir())  # each run() gives its workers a new empty folder

    def run(self) -> HeadlessResult:
        # Workers start in an empty folder of their own, outside the audited root: a host that reads settings,
        # hooks or instructions from its working directory and the folders above it (CLAUDE.md,
        # .claude/settings.json, AGENTS.md) finds none of the repository's. The root is in {root}.
        with tempfile.TemporaryDirectory(prefix="audit-mcp-worker-") as place:
            self._cwd = Path(place)
            result = self._run()
        if result.step is None or result.step.step_kind != "present_report":
            # What a partial, blocked or paused audit found so far, where a CI step uploads it from (report/).
            reporting.write_current_report(self.service)
        return result

    def _run(self) -> HeadlessResult:
        caps: dict[str, Any] = {
            "can_dispatch_subagents": True,
            "max_active_subagents": self.max_workers,
            "model": self.model,
        }
        probed = probe_before_run(self.service, self.model, self.quota_probe)
        if probed.note:
            learned = "".join(f"; learned {k}={v}" for k, v in probed.learned.items())
            self.say(f"provider probe: {probed.note}{learned}")
        fresh = self.new_audit and not reporting.audit_in_flight(self.service)
        step = self.service.next_step(
            caps, client_name=CLIENT_NAME, since=self.since, retry_blocked=self.retry_blocked, new_audit=fresh
        )
        for notice in step.notices:
            self.say(f"notice: {notice}")
        result = HeadlessResult(EXIT_PARTIAL, "partial", "", step)
        while step.step_kind in ("dispatch_review", "single_task_fallback") and step.run_id:
            if self.max_runs is not None and len(result.runs) >= self.max_runs:
                result.message = (
                    f"stopped after {len(result.runs)} review run(s) (--max-runs {self.max_runs}) with work still "
                    "open; run the same command again to go on"
                )
                result.step = step
                return result
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
            self.stopped = None
            failures = self._run_packets(step.run_id, plan)
            result.failures.update(failures)
            if self.stopped:  # the run stays open; the next invocation resumes it after the cooldown
                result.message, result.step = self.stopped, step
                return result
            # A refused results file is not an error the worker saw: the merge reads the file again and
            # hands the packet out with the file's errors.
            summary = self.service.merge_and_ingest(
                step.run_id, _seen(failures), actor="headless", printed=self._printed
            )
            self._printed = {}
            for packet_id in summary.ingested_from_files:
                result.failures.pop(packet_id, None)
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
            result.exit_code, result.outcome = EXIT_BLOCKED, "blocked"
            result.message = (
                f"{step.reason} (the audit waits: once the cause is fixed, run the same command with --retry-blocked)"
            )
            if self.command:
                self.service.update_handoff(step, command=self.command)  # resuming repeats this very command
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
        status = self.service.plan_status(run_id)  # a resumed run: what is left of it, as the scheduler sees it now
        order = {w.packet_id: i for i, w in enumerate(status.waiting)}
        queue = sorted((p for p in plan["packets"] if p["packet_id"] in order), key=lambda p: order[p["packet_id"]])
        if done or status.failed:
            self.say(f"run {run_id}: resuming; {len(done)} packet(s) already submitted, {len(queue)} to go")
        window = max(1, min(status.width, self.max_workers))
        self.say(f"run {run_id}: {len(queue)} packet(s), up to {window} worker(s) at a time")
        # Launch pacing: a packet starts no sooner than its not_before_seconds after the first start (counted
        # from the first outstanding packet when the run resumes).
        offsets = {w.packet_id: w.not_before_seconds for w in status.waiting}
        base = min(offsets.values(), default=0.0)
        resume_at = 0.0  # monotonic: a cooldown the server set while the run went
        first_start: float | None = None
        running: list[Worker] = []
        launched: list[str] = []
        failures: dict[str, str] = {}
        try:
            while queue or running:
                due = resume_at - time.monotonic()
                while queue and len(running) < window and due <= 0:
                    if first_start is not None:
                        due = first_start + offsets[queue[0]["packet_id"]] - base - time.monotonic()
                        if due > 0:
                            break
                    packet = queue.pop(0)
                    running.append(self._launch(run_id, packet))
                    launched.append(packet["packet_id"])
                    first_start = time.monotonic() if first_start is None else first_start
                if not running and resume_at > time.monotonic():
                    wait = resume_at - time.monotonic()
                    self.say(f"  cooling down {wait:.0f}s after rate-limit errors")
                    self.sleep(wait)
                    resume_at = 0.0
                    continue
                if not running:
                    time.sleep(min(max(due, 0.0), 1.0))  # only a paced launch is waiting
                    continue
                finished = reap(running, self.timeout)
                if not finished:
                    wait_a_little(running[0])
                    continue
                for worker, timed_out in finished:
                    error = self._outcome(run_id, worker, timed_out)
                    if error is None:
                        continue
                    failures[worker.packet_id] = error
                    if error.startswith(_REFUSED_FILE):
                        self.say(f"  {worker.packet_id}: its results file was refused; it is handed out again")
                        continue
                    self.say(f"  {worker.packet_id}: failed ({classify(error).kind}); output in {worker.stderr}")
                # Between waves the server has learned from the usage and failures so far: ask it what now.
                status = self.service.plan_status(run_id, _seen(failures), launched)
                if status.width != window:
                    self.say(f"  the scheduler now keeps {status.width} worker(s) running: {status.reasoning}")
                window = max(1, min(status.width, self.max_workers))
                offsets.update({w.packet_id: w.not_before_seconds for w in status.waiting})
                order = {w.packet_id: i for i, w in enumerate(status.waiting)}
                queue = sorted((p for p in queue if p["packet_id"] in order), key=lambda p: order[p["packet_id"]])
                if status.cooldown_until:
                    until = datetime.fromisoformat(status.cooldown_until.replace("Z", "+00:00"))
                    wait = max(0.0, (until - datetime.now(UTC)).total_seconds())
                    resume_at = time.monotonic() + wait
                    if wait > self.max_wait and queue:
                        self.stopped = (
                            f"rate-limited: the scheduler's cooldown ends in {wait:.0f}s, past --max-wait "
                            f"{self.max_wait:.0f}s; {len(queue)} packet(s) of run {run_id} are not launched yet: "
                            "run the same command again later to resume"
                        )
                        self.say(f"  {self.stopped}")
                        queue = []
        finally:
            for worker in running:
                stop(worker)
        return failures

    def _launch(self, run_id: str, packet: Mapping[str, Any]) -> Worker:
        results = self.service.results_path(run_id, packet["packet_id"])
        results.parent.mkdir(parents=True, exist_ok=True)  # a worker that only writes files needs the folder
        values = {
            "prompt_path": str(packet["prompt_path"]),
            "run_id": run_id,
            "packet_id": packet["packet_id"],
            "root": str(self.service.root),
            "artifacts_dir": str(self.service.artifacts_dir),
            "dispatch_plan": str(self.service.plan_path(run_id)),
            "results_path": str(results),
        }
        env = worker_env(values, self.service.artifacts_dir, self.env)
        env["AUDIT_MCP_RESULTS_MODE"] = self.worker_mode
        worker = launch(
            fill_template(self.template, values),
            packet["packet_id"],
            self.service.run_dir(run_id) / "workers",
            self._cwd,
            env,
        )
        self.say(f"  {packet['packet_id']}: worker started ({len(packet['tasks'])} task(s))")
        return worker

    def _outcome(self, run_id: str, worker: Worker, timed_out: bool) -> str | None:
        """None when the packet's work is recorded (submitted, or its results file); else the error to report."""
        if worker.packet_id in self._submitted(run_id):
            self.say(f"  {worker.packet_id}: submitted{self._read_output(worker)}")
            return None
        receipt = self.service.collect_results_file(run_id, worker.packet_id)
        if receipt is not None and receipt.accepted:
            self.say(f"  {worker.packet_id}: results file accepted{self._read_output(worker)}")
            return None
        path = self.service.results_path(run_id, worker.packet_id)
        if receipt is not None:
            problems = "; ".join(f"{e.location}: {e.message}" for e in receipt.errors[:5])
            return f"{_REFUSED_FILE} {path} was refused: {problems}"
        missing = f"without writing its results file {path}" if self.worker_mode == "file" else "without submitting"
        if timed_out:
            return f"the worker timed out after {self.timeout:.0f}s {missing}"
        code = worker.process.returncode
        output = tail(worker.stderr) or tail(worker.stdout)
        return f"the worker exited with code {code} {missing}: {output}".strip()

    def _read_output(self, worker: Worker) -> str:
        """What a worker that did its packet printed about usage and rate limits, kept for the merge."""
        report = read_worker_output(current_output(worker.stdout), current_output(worker.stderr))
        if report.empty:
            return ""
        self._printed[worker.packet_id] = report
        line = describe(report, datetime.now(UTC))
        return f"; it printed {line}" if line else ""


def _seen(failures: Mapping[str, str]) -> list[dict[str, str]]:
    """The failures a worker saw, for the server; a refused results file is not one (the merge reads the file
    again and hands the packet out with the file's errors)."""
    return [{"packet_id": p, "error": e} for p, e in failures.items() if not e.startswith(_REFUSED_FILE)]


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
