"""A long-lived server forecasts from the packing it kept while the queue is unchanged, and never past a
change: a write by another process (another host's dispatch, a merge) makes it forecast again; a subagent's
submission, which only records its packet's answer, does not. What one process packs it records in the store,
so other processes read it: a dispatch records the run after its own, and a fresh process packs nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.usecases import packing
from audit_mcp.usecases.service import AuditService
from tests.driving import opinions

CONFIG = "max_packet_tokens = 6000\nmax_packets_per_run = 3\ncontext_pass = false\nverification_pass = false\n"


def _forecasts(service: AuditService) -> tuple[dict[str, Any], dict[str, Any]]:
    return service.quota().forecast, service.status().forecast or {}


def count_packings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one at every packing of a next run, in this process."""
    packings: list[int] = []
    real = packing.pack_next

    def counted(*args: Any, **kwargs: Any) -> Any:
        packings.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(packing, "pack_next", counted)
    return packings


def test_forecasts_are_kept_until_the_store_changes_in_any_process(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / ".audit-mcp.toml").write_text(CONFIG)
    packings = count_packings(monkeypatch)
    server = AuditService(repo)  # the long-lived one, as an MCP server is
    assert server.next_step({}).step_kind == "capability_check"
    packed = len(packings)
    first = _forecasts(server)
    assert _forecasts(server) == first and first[0]["packets"] == 3
    assert len(packings) == packed, "nothing changed since the step's forecast: no packing again"

    # Another process opens the run (a CLI host): the server's next forecast is of the run after it.
    proc = subprocess.run(
        [sys.executable, "-m", "audit_mcp", "next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true"],
        capture_output=True,
        text=True,
        check=True,
    )
    step = json.loads(proc.stdout)
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    quota, status = _forecasts(server)
    assert len(packings) == packed, "the dispatching process recorded the run after its own: no packing here"
    fresh_quota, fresh_status = _forecasts(AuditService(repo))
    assert quota == fresh_quota and status == fresh_status
    assert len(packings) == packed
    handed_out = sum(len(p["tasks"]) for p in plan["packets"])
    assert quota["pending_cells"] == first[0]["pending_cells"] - handed_out
    assert status["open_run"] == plan["run_id"] and status["open_run_packets_outstanding"] == 3

    # A subagent's submission in its own process, then the merge: the server sees both.
    packet = plan["packets"][0]
    results = Path(repo / "results.json")
    results.write_text(json.dumps(opinions().results(packet)))
    submit = ["submit-packet", "--root", str(repo), "--run-id", plan["run_id"], "--packet-id", packet["packet_id"]]
    subprocess.run(
        [sys.executable, "-m", "audit_mcp", *submit, "--results", str(results)],
        capture_output=True,
        text=True,
        check=True,
    )
    before = len(packings)
    assert server.status().forecast["open_run_packets_outstanding"] == 2  # type: ignore[index]
    # A submission only records the packet's answer: the next run is what it was, and is not packed again.
    assert _forecasts(server) == _forecasts(AuditService(repo))
    assert len(packings) == before, "the fresh service read the forecast recorded at the dispatch"
    AuditService(repo).merge_and_ingest(plan["run_id"], [])
    quota, status = _forecasts(server)
    assert len(packings) == before + 1, "the merge moved the queue: the server packs, once, and records it"
    assert (quota, status) == _forecasts(AuditService(repo))
    assert len(packings) == before + 1
    assert status["open_run"] is None
    # The two packets never submitted went back to the queue: the next run is forecast with them.
    assert quota["pending_cells"] == first[0]["pending_cells"] - len(packet["tasks"])
