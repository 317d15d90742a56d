"""The command line loads what a verb uses: ``--version`` and ``--help`` no use case and no pydantic, ``quota``,
``status`` and ``next-step`` their own and not the service's others (merge, submission, report), nor the packer
and the prompts when the forecast is recorded in the store, and they answer as the service does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from audit_mcp.surfaces import workers
from audit_mcp.surfaces.cli import running
from audit_mcp.usecases.service import AuditService

_PROBE = """
import json, sys
from audit_mcp.surfaces.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "loaded": sorted(m for m in sys.modules if m.startswith("audit_mcp"))}),
      file=sys.stderr)
"""
_OTHER_USE_CASES = (
    "audit_mcp.usecases.service",
    "audit_mcp.usecases.merging",
    "audit_mcp.usecases.submission",
    # The validation of answers (and their input models): a forecast and a status validate nothing.
    "audit_mcp.engine.opinion_validation",
    # The packer: the dispatch recorded the next run's packets, which the views read.
    "audit_mcp.usecases.packing",
)
_PROMPTS = ("audit_mcp.engine.packet_prompts", "audit_mcp.engine.opinion_prompts")  # nor does a quota write any
_PACKER = "audit_mcp.engine.packets"


def _run(*argv: str) -> tuple[str, set[str]]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=False)
    probe = json.loads(proc.stderr.strip().splitlines()[-1])
    assert probe["code"] == 0, proc.stderr
    return proc.stdout, set(probe["loaded"])


def _imported(*argv: str) -> tuple[str, set[str]]:
    """What ``python -m audit_mcp ARGV`` prints, and every module it imports (``-X importtime`` lists each)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "audit_mcp", *argv], capture_output=True, text=True, check=True
    )
    rows = [line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    return proc.stdout, set(rows[1:])  # the first row is the table's header


@pytest.mark.parametrize("argv", [("--version",), ("--help",), ("quota", "--help")], ids=" ".join)
def test_version_and_help_through_the_command_line_load_no_pydantic(argv: tuple[str, ...]) -> None:
    out, loaded = _imported(*argv)
    assert "audit-mcp" in out and "audit_mcp.surfaces.cli.parser" in loaded, (out, loaded)
    assert not {m for m in loaded if m.split(".")[0] in ("pydantic", "pydantic_core")}, sorted(loaded)
    # Nor what only one verb runs: the server's sockets and token check, the workers' process handling.
    assert not loaded & {"audit_mcp.surfaces.http_auth", "audit_mcp.surfaces.workers"}, sorted(loaded)


def test_run_offers_the_worker_modes_the_runner_knows() -> None:
    assert running.WORKER_MODES == workers.WORKER_MODES


def test_version_loads_no_use_case() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from audit_mcp.surfaces.cli import parser; print(sorted(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = set(json.loads(proc.stdout.replace("'", '"')))
    assert "audit_mcp.usecases.workspace" not in loaded and "audit_mcp.usecases.service" not in loaded
    assert "pydantic" not in loaded, "the parser and --version build no model"


def test_quota_and_status_load_their_own_use_case_only_and_answer_as_the_service(repo: Path) -> None:
    service = AuditService(repo)
    assert service.next_step({"can_dispatch_subagents": True}).step_kind
    at = ("--root", str(repo))
    out, loaded = _run("quota", *at)
    assert "audit_mcp.usecases.quota" in loaded and not loaded & {*_OTHER_USE_CASES, *_PROMPTS, _PACKER}, loaded
    quota = json.loads(out)
    expected = json.loads(service.quota().model_dump_json())
    assert quota["forecast"] == expected["forecast"]
    assert quota["packet_budget_tokens"] == expected["packet_budget_tokens"]
    out, loaded = _run("status", "--json", *at)
    assert "audit_mcp.usecases.status" in loaded and not loaded & {*_OTHER_USE_CASES, *_PROMPTS, _PACKER}, loaded
    status = json.loads(out)
    expected = json.loads(service.status().model_dump_json())
    assert status["coverage"] == expected["coverage"] and status["forecast"] == expected["forecast"]


def test_submit_packet_and_plan_status_load_their_own_use_case_only_and_record_as_the_service(
    repo: Path, tmp_path: Path
) -> None:
    """A subagent's shell fallback starts ``submit-packet`` once per packet, a host ``plan-status`` between
    waves: each loads its use case, not the service's others (the report, the stages; submit-packet neither
    the merge nor the packer)."""
    (repo / ".audit-mcp.toml").write_text("context_pass = false\nverification_pass = false\n")
    service = AuditService(repo)
    step = service.next_step({"can_dispatch_subagents": True})
    plan = json.loads(Path(step.artifact_paths["plan"]).read_text())
    run_id, packet = plan["run_id"], plan["packets"][0]
    at = ("--root", str(repo))
    others = {"audit_mcp.usecases.service", "audit_mcp.findings.report", "audit_mcp.usecases.stages"}
    out, loaded = _run("plan-status", "--run-id", run_id, "--launched", packet["packet_id"], *at)
    # Nothing failed: neither the merge (where failures are checked at the end) nor the answers' input models.
    assert "audit_mcp.usecases.plan_status" in loaded, loaded
    assert not loaded & {*others, "audit_mcp.usecases.merging", "audit_mcp.engine.inputs"}, loaded
    assert json.loads(out)["run_id"] == run_id
    results = tmp_path / "results.json"
    answers = [
        {
            "task_id": t["task_id"],
            "status": "reviewed",
            "findings": [],
            "summary": f"Read {t['file']} lines {t['start_line']}-{t['end_line']} under {t['lens']}: nothing to "
            "report; the inputs it takes are checked before use.",
        }
        for t in packet["tasks"]
    ]
    results.write_text(json.dumps(answers))
    out, loaded = _run(
        "submit-packet", "--run-id", run_id, "--packet-id", packet["packet_id"], "--results", str(results), *at
    )
    assert "audit_mcp.usecases.submission" in loaded, loaded
    # A review packet in a store of one host: no prompt writer, no second opinion's answer models.
    second_opinions = {"audit_mcp.engine.opinion_validation", "audit_mcp.engine.opinion_inputs"}
    prompts = {"audit_mcp.usecases.packet_render", *_PROMPTS}
    assert not loaded & {*others, "audit_mcp.usecases.merging", "audit_mcp.usecases.packing"}, loaded
    assert not loaded & {*second_opinions, *prompts}, loaded
    receipt = json.loads(out)
    assert receipt["accepted"], receipt
    # The service reads what the command recorded: the packet's answer, and a second one is a duplicate.
    runs = {r["run_id"]: r for r in service.status().runs}
    assert runs[run_id]["submitted"] == 1
    again = service.submit_packet(run_id, packet["packet_id"], answers)
    assert receipt["tasks_covered"] == len(answers) and not receipt["duplicate"]
    assert again.accepted and again.duplicate


def test_quota_on_a_fresh_audit_reads_the_recorded_forecast_and_loads_no_packer(repo: Path) -> None:
    """The dispatch recorded the next run's forecast: the command's ``quota`` packs nothing, so it does not
    load the packer, and its forecast is the one the service computes."""
    service = AuditService(repo)
    assert service.next_step({"can_dispatch_subagents": True}).step_kind == "dispatch_review"
    out, loaded = _run("quota", "--root", str(repo))
    assert "audit_mcp.usecases.quota" in loaded and _PACKER not in loaded, sorted(loaded)
    assert json.loads(out)["forecast"] == json.loads(service.quota().model_dump_json())["forecast"]


def test_next_step_loads_the_obligation_loop_not_the_service_and_steps_as_it_does(repo: Path, tmp_path: Path) -> None:
    """``next-step`` runs the loop itself: the service's other use cases (status, quota, the operator verbs and
    their result models) are not loaded, and the step is the one the service hands out for the same state."""
    (repo / ".audit-mcp.toml").write_text("context_pass = false\nverification_pass = false\n")
    out, loaded = _run("next-step", "--root", str(repo), "--host-can-dispatch-subagents", "true")
    assert "audit_mcp.usecases.next_step" in loaded, loaded
    views = {"audit_mcp.usecases.status", "audit_mcp.usecases.quota", "audit_mcp.core.operations"}
    assert not loaded & {"audit_mcp.usecases.service", *views}, loaded
    step = json.loads(out)
    again = AuditService(repo).next_step({"can_dispatch_subagents": True})
    assert step["step_kind"] == again.step_kind == "dispatch_review"
    assert step["run_id"] == again.run_id
