"""Hosts sharing one audit through a PostgreSQL store, as separate processes with their own checkouts.

``python -m benchmarks.multi_host host ROOT STORE_URL REVIEWERS REVIEW_SECONDS [--die-after N]`` is one
host: it follows next_step with REVIEWERS scripted reviewers working at once (each takes REVIEW_SECONDS
per packet, standing in for a subagent's time), merges when the step says so, waits when it is told
to, and prints one JSON line per event (``handed``, ``accepted``, ``refused``, ``wait``, ``done``), flushed
before the next action, so a printed line is a fact even if the process is killed right after.
``--die-after N`` kills the host (``os._exit``) after its Nth accepted submission, holding claims.

``python -m benchmarks.multi_host bench [--review-seconds S]`` measures makespan with 1, 2 and 4 hosts and submit_packet
latency on PostgreSQL beside SQLite (needs PostgreSQL binaries, as the tests do).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from audit_mcp.surfaces.scripted import AnswerKeyReviewer  # noqa: E402
from audit_mcp.usecases.service import AuditService  # noqa: E402

_MODULE = '''"""Area {n}: request handling."""


def handle_{n}(request, store):
    """Look the record up and answer with its fields."""
    record = store.get(request.get("id"))
    if record is None:
        return {{"status": 404}}
    total = 0
    for item in record.get("items", []):
        total += item.get("price", 0) * item.get("quantity", 1)
    return {{"status": 200, "total": total, "name": record.get("name", "")}}
'''


def make_repo(root: Path, files: int) -> Path:
    """A git repository of ``files`` small modules, with packets small enough that there are many."""
    (root / "app").mkdir(parents=True)
    for n in range(files):
        (root / "app" / f"area_{n:03d}.py").write_text(_MODULE.format(n=n))
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "generated"]):
        subprocess.run(
            ["git", "-c", "user.email=b@example.com", "-c", "user.name=b", "-c", "init.defaultBranch=main", *args],
            cwd=root,
            check=True,
            capture_output=True,
        )
    return root


def checkout(origin: Path, where: Path, lease_seconds: int) -> Path:
    """A host's own clone of ``origin``, with its session config (small packets, two lenses) and, in the host's
    own config beside the clone (``host_config``), the lease: how hosts share an audit is the user's to set,
    never the repository's."""
    subprocess.run(["git", "clone", "-q", str(origin), str(where)], check=True, capture_output=True)
    (where / ".audit-mcp.toml").write_text('max_packet_tokens = 4000\nlenses = ["security", "correctness"]\n')
    host_config(where).write_text(
        'max_packet_tokens = 4000\nlenses = ["security", "correctness"]\n'
        f"[shared]\nclaim_lease_seconds = {lease_seconds}\n"
    )
    return where


def host_config(root: Path) -> Path:
    """The config of the host working in checkout ``root`` (its user's own file, outside the checkout)."""
    return root.parent / f"{root.name}.host.toml"


def _results(packet: dict[str, Any]) -> list[dict[str, Any]]:
    if packet.get("packet_kind", "review") != "review":  # the context packet: a threat model naming the root
        return AnswerKeyReviewer({"issues": []}).results(packet)
    return [
        {
            "task_id": task["task_id"],
            "status": "reviewed",
            "summary": f"Read {task['file']} lines {task['start_line']}-{task['end_line']} under the "
            f"{task['lens']} lens: the handler checks for a missing record and sums prices; nothing to report.",
            "findings": [],
        }
        for task in packet["tasks"]
    ]


class Host:
    def __init__(self, root: Path, store: str, reviewers: int, review_seconds: float, die_after: int) -> None:
        self.service = AuditService(root, store=store, config_path=host_config(root))
        self.reviewers = reviewers
        self.review_seconds = review_seconds
        self.die_after = die_after
        self.accepted = 0
        self._lock = threading.Lock()

    def say(self, event: str, **fields: Any) -> None:
        with self._lock:
            line = {"event": event, "host": str(self.service.root), "at": round(time.time(), 2), **fields}
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()

    def review(self, run_id: str, packet: dict[str, Any]) -> None:
        time.sleep(self.review_seconds)  # the subagent's reading time
        receipt = self.service.submit_packet(run_id, packet["packet_id"], _results(packet))
        with self._lock:
            if receipt.accepted:
                self.accepted += 1
            dead = self.die_after and self.accepted >= self.die_after
        self.say(
            "accepted" if receipt.accepted else "refused",
            run_id=run_id,
            packet_id=packet["packet_id"],
            tasks=[t["task_id"] for t in packet["tasks"]],
            duplicate=receipt.duplicate,
            error=receipt.errors[0].message if receipt.errors else None,
        )
        if dead:
            os._exit(9)  # killed mid-run: its other claims stay held until their leases lapse

    def run(self) -> None:
        caps = {"can_dispatch_subagents": True, "max_active_subagents": self.reviewers}
        step = self.service.next_step(caps)
        with ThreadPoolExecutor(self.reviewers) as pool:
            for _ in range(10_000):
                if step.step_kind == "present_report":
                    self.say("done", completeness=step.completeness)
                    return
                if step.step_kind == "wait":
                    self.say("wait", reason=step.reason)
                    time.sleep(min(step.retry_after_seconds or 1.0, 0.25))
                elif step.step_kind == "dispatch_review":
                    run_id = str(step.run_id)
                    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
                    packets = {p["packet_id"]: p for p in plan["packets"]}
                    handed = list(step.packet_ids or [])
                    self.say("handed", run_id=run_id, packets=handed)
                    list(pool.map(self.review, [run_id] * len(handed), [packets[p] for p in handed]))
                    self.service.merge_and_ingest(run_id, [])
                else:
                    raise SystemExit(f"unexpected step {step.step_kind}: {step.reason}")
                step = self.service.next_step(caps)
        raise SystemExit("the audit did not finish")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="verb", required=True)
    host = sub.add_parser("host")
    host.add_argument("root", type=Path)
    host.add_argument("store")
    host.add_argument("reviewers", type=int)
    host.add_argument("review_seconds", type=float)
    host.add_argument("--die-after", type=int, default=0)
    bench_args = sub.add_parser("bench")
    bench_args.add_argument("--review-seconds", type=float, default=1.0, help="each scripted review's duration")
    args = parser.parse_args(argv)
    if args.verb == "host":
        Host(args.root, args.store, args.reviewers, args.review_seconds, args.die_after).run()
        return 0
    from benchmarks.multi_host_bench import bench

    print(json.dumps(bench(args.review_seconds), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
