"""One run of ``audit-mcp run``: each packet to a worker of its own, in a sliding window.

At most the scheduler's width (and ``--max-workers``) run at once; no packet starts before its
``not_before_seconds``; each time a worker ends, ``plan_status`` (told the failures so far) gives the width,
the cooldown and the start times of the packets not launched yet. Each worker's life (its packet, start, end,
exit status, and the class of its failure) goes into the run ledger as it ends. A packet whose results file
was produced elsewhere (``--batch-results-dir``) is ingested instead of launched; what a worker that did its
packet printed about usage and rate limits is kept for the merge.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from audit_mcp.scheduling.failures import classify
from audit_mcp.scheduling.worker_output import WorkerReport, describe, read_worker_output
from audit_mcp.surfaces.run_progress import RunProgress
from audit_mcp.surfaces.workers import (
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
from audit_mcp.usecases.service import AuditService
from audit_mcp.usecases.workspace import iso

REFUSED_FILE = "the worker's results file"

Say = Callable[[str], None]
Sleep = Callable[[float], None]


@dataclass
class Crew:
    """What every run of one ``audit-mcp run`` shares: the service, the worker command and its limits, where to
    say things, and what it has done so far."""

    service: AuditService
    template: str
    max_workers: int
    timeout: float
    max_wait: float
    worker_mode: WorkerMode
    env: dict[str, str]
    cwd: Path
    say: Say
    sleep: Sleep
    progress: Say
    tracker: RunProgress
    results_dir: Path | None = None
    printed: dict[str, WorkerReport] = field(default_factory=dict)
    stopped: str | None = None  # why the current run launches nothing more
    tried: dict[Path, int] = field(default_factory=dict)  # results files ingested, by their mtime then
    killed: list[tuple[str, Worker]] = field(default_factory=list)  # workers stopped when the run was interrupted

    def show(self) -> None:
        self.progress(self.tracker.line())


def seen(failures: Mapping[str, str]) -> list[dict[str, str]]:
    """The failures a worker saw, for the server; a refused results file is not one (the merge reads the file
    again and hands the packet out with the file's errors)."""
    return [{"packet_id": p, "error": e} for p, e in failures.items() if not e.startswith(REFUSED_FILE)]


def run_packets(crew: Crew, run_id: str, plan: Mapping[str, Any]) -> dict[str, str]:
    """Launch the run's outstanding packets until each is done or failed; the failures, by packet id."""
    service = crew.service
    done = service.submitted_packets(run_id)
    status = service.plan_status(run_id)  # a resumed run: what is left of it, as the scheduler sees it now
    order = {w.packet_id: i for i, w in enumerate(status.waiting)}
    queue = sorted((p for p in plan["packets"] if p["packet_id"] in order), key=lambda p: order[p["packet_id"]])
    if done or status.failed:
        crew.say(f"run {run_id}: resuming; {len(done)} packet(s) already submitted, {len(queue)} to go")
    window = max(1, min(status.width, crew.max_workers))
    crew.say(f"run {run_id}: {len(queue)} packet(s), up to {window} worker(s) at a time")
    queue = _take_results(crew, run_id, queue)
    crew.show()
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
            queue = _take_results(crew, run_id, queue)
            due = resume_at - time.monotonic()
            while queue and len(running) < window and due <= 0:
                if first_start is not None:
                    due = first_start + offsets[queue[0]["packet_id"]] - base - time.monotonic()
                    if due > 0:
                        break
                packet = queue.pop(0)
                _launch(crew, run_id, packet, running)
                launched.append(packet["packet_id"])
                first_start = time.monotonic() if first_start is None else first_start
            if not running and resume_at > time.monotonic():
                wait = resume_at - time.monotonic()
                crew.say(f"  cooling down {wait:.0f}s after rate-limit errors")
                crew.sleep(wait)
                resume_at = 0.0
                continue
            if not running:
                time.sleep(min(max(due, 0.0), 1.0))  # only a paced launch is waiting
                continue
            finished = reap(running, crew.timeout)
            if not finished:
                wait_a_little(running[0])
                continue
            for worker, timed_out in finished:
                error = _ended(crew, run_id, worker, timed_out)
                if error is not None:
                    failures[worker.packet_id] = error
            crew.show()
            # Between waves the server has learned from the usage and failures so far: ask it what now.
            status = service.plan_status(run_id, seen(failures), launched)
            if status.width != window:
                crew.say(f"  the scheduler now keeps {status.width} worker(s) running: {status.reasoning}")
            window = max(1, min(status.width, crew.max_workers))
            offsets.update({w.packet_id: w.not_before_seconds for w in status.waiting})
            order = {w.packet_id: i for i, w in enumerate(status.waiting)}
            queue = sorted((p for p in queue if p["packet_id"] in order), key=lambda p: order[p["packet_id"]])
            if status.cooldown_until:
                until = datetime.fromisoformat(status.cooldown_until.replace("Z", "+00:00"))
                wait = max(0.0, (until - datetime.now(UTC)).total_seconds())
                resume_at = time.monotonic() + wait
                if wait > crew.max_wait and queue:
                    crew.stopped = (
                        f"rate-limited: the scheduler's cooldown ends in {wait:.0f}s, past --max-wait "
                        f"{crew.max_wait:.0f}s; {len(queue)} packet(s) of run {run_id} are not launched yet: "
                        "run the same command again later to resume"
                    )
                    crew.say(f"  {crew.stopped}")
                    queue = []
    finally:
        for worker in running:  # an interrupt: accepted work stays, the rest goes out again on resuming
            stop(worker)
            crew.killed.append((run_id, worker))
    return failures


def _launch(crew: Crew, run_id: str, packet: Mapping[str, Any], running: list[Worker]) -> None:
    """Start the packet's worker, in ``running`` before anything else happens (an interrupt stops what is there)."""
    service = crew.service
    results = service.results_path(run_id, packet["packet_id"])
    results.parent.mkdir(parents=True, exist_ok=True)  # a worker that only writes files needs the folder
    values = {
        "prompt_path": str(packet["prompt_path"]),
        "run_id": run_id,
        "packet_id": packet["packet_id"],
        "root": str(service.root),
        "artifacts_dir": str(service.artifacts_dir),
        "dispatch_plan": str(service.plan_path(run_id)),
        "results_path": str(results),
    }
    env = worker_env(values, service.artifacts_dir, crew.env)
    env["AUDIT_MCP_RESULTS_MODE"] = crew.worker_mode
    running.append(
        launch(
            fill_template(crew.template, values),
            packet["packet_id"],
            service.run_dir(run_id) / "workers",
            crew.cwd,
            env,
        )
    )
    crew.tracker.launched()
    crew.say(f"  {packet['packet_id']}: worker started ({len(packet['tasks'])} task(s))")


def _ended(crew: Crew, run_id: str, worker: Worker, timed_out: bool) -> str | None:
    """Say how a worker ended and record it in the ledger; the error to report, or None when its work is in."""
    error, label = _outcome(crew, run_id, worker, timed_out)
    report = crew.printed.get(worker.packet_id)
    kind = None
    if error is None:
        crew.say(f"  {worker.packet_id}: {label}{_printed(report)}")
    elif error.startswith(REFUSED_FILE):
        kind = "invalid_results"
        crew.say(f"  {worker.packet_id}: its results file was refused; it is handed out again")
    else:
        kind = classify(error).kind
        crew.say(f"  {worker.packet_id}: failed ({kind}); output in {worker.stderr}")
    crew.tracker.finished(error is None)
    record(crew, run_id, worker, "timeout" if timed_out else worker.process.returncode, label, kind, report)
    return error


def record(
    crew: Crew,
    run_id: str,
    worker: Worker,
    exit_status: int | str | None,
    outcome: str,
    failure_class: str | None = None,
    report: WorkerReport | None = None,
) -> None:
    """The worker's life, in the run ledger."""
    program = shlex.split(crew.template)[0] if crew.template.strip() else "worker"
    crew.service.record_worker(
        run_id,
        worker.packet_id,
        worker=f"{Path(program).name} pid {worker.process.pid}",
        started_at=iso(worker.wall_start),
        ended_at=iso(datetime.now(UTC)),
        exit_status=exit_status,
        outcome=outcome,
        failure_class=failure_class,
        usage=report.usage if report is not None else None,
    )


def _outcome(crew: Crew, run_id: str, worker: Worker, timed_out: bool) -> tuple[str | None, str]:
    """(None, how its work came in) when the packet's work is recorded (submitted, or its results file); else
    (the error to report, what happened)."""
    service = crew.service
    if worker.packet_id in service.submitted_packets(run_id):
        _read_output(crew, worker)
        return None, "submitted"
    receipt = service.collect_results_file(run_id, worker.packet_id)
    if receipt is not None and receipt.accepted:
        _read_output(crew, worker)
        return None, "results file accepted"
    path = service.results_path(run_id, worker.packet_id)
    if receipt is not None:
        problems = "; ".join(f"{e.location}: {e.message}" for e in receipt.errors[:5])
        return f"{REFUSED_FILE} {path} was refused: {problems}", "results file refused"
    missing = f"without writing its results file {path}" if crew.worker_mode == "file" else "without submitting"
    if timed_out:
        return f"the worker timed out after {crew.timeout:.0f}s {missing}", "timed out"
    code = worker.process.returncode
    output = tail(worker.stderr) or tail(worker.stdout)
    return f"the worker exited with code {code} {missing}: {output}".strip(), "failed"


def _read_output(crew: Crew, worker: Worker) -> None:
    """Keep what a worker that did its packet printed about usage and rate limits, for the merge."""
    report = read_worker_output(current_output(worker.stdout), current_output(worker.stderr))
    if not report.empty:
        crew.printed[worker.packet_id] = report


def _printed(report: WorkerReport | None) -> str:
    line = describe(report, datetime.now(UTC)) if report is not None else ""
    return f"; it printed {line}" if line else ""


def _take_results(crew: Crew, run_id: str, queue: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The queue less the packets whose results file (``<packet_id>.json``) appeared in ``--batch-results-dir``
    and was accepted; a refused one is said and its packet launched as usual (each file is read again only
    once it changes)."""
    folder = crew.results_dir
    if folder is None or not queue:
        return queue
    kept = []
    for packet in queue:
        path = folder / f"{packet['packet_id']}.json"
        try:
            stamp = path.stat().st_mtime_ns
        except OSError:
            kept.append(packet)
            continue
        if crew.tried.get(path) == stamp:
            kept.append(packet)
            continue
        crew.tried[path] = stamp
        (receipt,) = crew.service.ingest_results([path], run_id=run_id)
        if receipt.receipt.accepted:
            crew.tracker.finished(True)
            crew.say(f"  {packet['packet_id']}: results file {path} accepted (produced elsewhere; no worker started)")
            continue
        first = receipt.receipt.errors[0] if receipt.receipt.errors else None
        crew.say(
            f"  {packet['packet_id']}: results file {path} refused"
            + (f" ({first.location}: {first.message})" if first else "")
            + "; a worker reviews the packet instead"
        )
        kept.append(packet)
    return kept
