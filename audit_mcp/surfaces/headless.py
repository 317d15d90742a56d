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
run's packets without recorded work are relaunched. Results produced elsewhere are ingested first
(``results``: files named by packet id) and, for packets about to be launched, as they appear in
``results_dir``. As it goes the runner says where it stands (``run_progress``: packets done of those the
audit's forecast counts, elapsed, time left, failures); Ctrl-C or SIGTERM ends it with an outcome that
names the command to resume (``run_outcome``). One run's workers are ``headless_run``'s.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from audit_mcp.core.errors import ConfigError
from audit_mcp.surfaces.headless_run import Crew, Say, Sleep, record, run_packets, seen
from audit_mcp.surfaces.run_outcome import (
    EXIT_BLOCKED,
    EXIT_COMPLETE,
    EXIT_PARTIAL,
    HeadlessResult,
    interrupt_on_sigterm,
    interrupted,
    print_result,
    resume_command,
)
from audit_mcp.surfaces.run_progress import RunProgress
from audit_mcp.surfaces.workers import WORKER_MODES, WorkerMode, fill_template, worker_env
from audit_mcp.usecases import reporting
from audit_mcp.usecases.probing import probe_before_run
from audit_mcp.usecases.service import AuditService

__all__ = ["HeadlessResult", "HeadlessRunner", "fill_template", "interrupt_on_sigterm", "print_result", "worker_env"]

CLIENT_NAME = "audit-mcp-run"


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
        progress: Say = lambda _line: None,
        sleep: Sleep = time.sleep,  # only for rate-limit cooldowns
        env: Mapping[str, str] | None = None,
        results: Sequence[Path] = (),
        results_dir: Path | None = None,
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
        if results_dir is not None and not results_dir.is_dir():
            raise ConfigError(
                f"--batch-results-dir {results_dir} is not a folder; pass the folder the results files are written "
                "to (each named <packet_id>.json)"
            )
        for path in results:
            if not path.is_file():
                raise ConfigError(f"--results {path} is not a file; pass a results file named <packet_id>.json")
        self.service = service
        self.model = model
        self.since = since
        self.new_audit = new_audit
        self.max_runs = max_runs
        self.retry_blocked = retry_blocked
        self.quota_probe = quota_probe
        self.command = command
        self.say = say
        self.results = list(results)
        self.tracker = RunProgress()
        self.result = HeadlessResult(EXIT_PARTIAL, "partial", "", None)
        self.crew = Crew(
            service=service,
            template=template,
            max_workers=max_workers,
            timeout=timeout,
            max_wait=max_wait,
            worker_mode=worker_mode,
            env=dict(os.environ if env is None else env),
            cwd=Path(tempfile.gettempdir()),  # each run() gives its workers a new empty folder
            say=say,
            sleep=sleep,
            progress=progress,
            tracker=self.tracker,
            results_dir=results_dir,
        )

    @property
    def stopped(self) -> str | None:
        return self.crew.stopped

    def run(self) -> HeadlessResult:
        """The whole audit, or as much of it as the limits, a blocker or an interrupt allow. Ctrl-C (or SIGTERM,
        with ``interrupt_on_sigterm``) stops the workers and ends with the ``interrupted`` outcome."""
        # Workers start in an empty folder of their own, outside the audited root: a host that reads settings,
        # hooks or instructions from its working directory and the folders above it (CLAUDE.md,
        # .claude/settings.json, AGENTS.md) finds none of the repository's. The root is in {root}.
        try:
            with tempfile.TemporaryDirectory(prefix="audit-mcp-worker-") as place:
                self.crew.cwd = Path(place)
                result = self._run()
        except KeyboardInterrupt:
            result = interrupted(self.result, self.command)
            for run_id, worker in self.crew.killed:
                record(self.crew, run_id, worker, worker.process.returncode, "stopped: the run was interrupted")
        result.progress = {
            "packets_done": self.tracker.done,
            "packets_failed": self.tracker.failed,
            "packets_forecast": self.tracker.total,
            "seconds": round(time.monotonic() - self.tracker.started),
        }
        if result.step is None or result.step.step_kind != "present_report":
            # What a partial, blocked or paused audit found so far, where a CI step uploads it from (report/).
            reporting.write_current_report(self.service)
        return result

    def _run(self) -> HeadlessResult:
        caps: dict[str, Any] = {
            "can_dispatch_subagents": True,
            "max_active_subagents": self.crew.max_workers,
            "model": self.model,
        }
        probed = probe_before_run(self.service, self.model, self.quota_probe)
        if probed.note:
            learned = "".join(f"; learned {k}={v}" for k, v in probed.learned.items())
            self.say(f"provider probe: {probed.note}{learned}")
        self._ingest_given()
        fresh = self.new_audit and not reporting.audit_in_flight(self.service)
        step = self.service.next_step(
            caps, client_name=CLIENT_NAME, since=self.since, retry_blocked=self.retry_blocked, new_audit=fresh
        )
        for notice in step.notices:
            self.say(f"notice: {notice}")
        result = self.result
        result.step = step
        result.resume_command = resume_command(self.command, started=True)
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
            if wait > self.crew.max_wait:
                result.message = (
                    f"rate-limited: the scheduler's cooldown ends in {wait:.0f}s, past --max-wait "
                    f"{self.crew.max_wait:.0f}s; run the same command again later to resume"
                )
                result.step = step
                return result
            if wait > 0:
                self.say(f"cooling down {wait:.0f}s after rate-limit errors")
                self.crew.sleep(wait)
            result.runs.append(step.run_id)
            self.crew.stopped = None
            self.tracker.expect(self.service.audit_forecast())
            failures = run_packets(self.crew, step.run_id, plan)
            result.failures.update(failures)
            if self.crew.stopped:  # the run stays open; the next invocation resumes it after the cooldown
                result.message, result.step = self.crew.stopped, step
                return result
            # A refused results file is not an error the worker saw: the merge reads the file again and
            # hands the packet out with the file's errors.
            summary = self.service.merge_and_ingest(
                step.run_id, seen(failures), actor="headless", printed=self.crew.printed
            )
            self.crew.printed = {}
            for packet_id in summary.ingested_from_files:
                result.failures.pop(packet_id, None)
            self.say(
                f"run {step.run_id} merged: {summary.tasks_covered} task(s) covered, {summary.packets_failed} "
                f"packet(s) failed, completeness {summary.completeness}"
            )
            step = self.service.next_step(caps, client_name=CLIENT_NAME)
            result.step = step
        result.step = step
        if step.step_kind == "present_report":
            result.report_path = self.service.report_md_path
            result.report_json_path = self.service.report_json_path
            complete = step.completeness == "complete"
            result.exit_code = EXIT_COMPLETE if complete else EXIT_PARTIAL
            result.outcome = "complete" if complete else "partial"
            result.resume_command = None if complete else result.resume_command
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

    def _ingest_given(self) -> None:
        """Record the results files given with ``--results``, and those already in ``--batch-results-dir`` whose
        packet exists, before the first step (a run whose packets are all answered merges at once)."""
        given = list(self.results)
        folder = self.crew.results_dir
        if folder is not None:
            known = self.service.known_packets(sorted(p.stem for p in folder.glob("*.json")))
            given += [folder / f"{packet}.json" for packet in known]
        if not given:
            return
        for item in self.service.ingest_results(given):
            receipt = item.receipt
            if folder is not None:
                path = Path(item.file)
                self.crew.tried[path] = path.stat().st_mtime_ns
            if receipt.accepted:
                self.say(f"results file {item.file}: accepted for packet {receipt.packet_id}")
                continue
            first = receipt.errors[0] if receipt.errors else None
            self.say(
                f"results file {item.file}: refused with {len(receipt.errors)} error(s)"
                + (f", first {first.location}: {first.message}" if first else "")
                + "; nothing of it was recorded (its packet goes to a worker)"
            )

    def _cooldown_seconds(self, plan: Mapping[str, Any]) -> float:
        live = self.service.active_cooldown()
        moments = [m for m in (plan.get("cooldown_until"), live) if m]
        if not moments:
            return 0.0
        until = max(datetime.fromisoformat(m.replace("Z", "+00:00")) for m in moments)
        return max(0.0, (until - datetime.now(UTC)).total_seconds())
