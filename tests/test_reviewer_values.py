"""Every value a reviewer sends is checked before it is stored or learned; malformed input is a refusal.

Numbers are finite and bounded, text is UTF-8 without control characters, sizes are capped, and JSON of
every broken kind ends in a receipt (exit code 2 on the CLI, a tool error naming the place over MCP),
never a traceback.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from audit_mcp.surfaces.server import build_server
from audit_mcp.usecases.service import AuditService
from tests.conftest import FIXTURES, ScriptedReviewer, git
from tests.driving import cli, finish, first_review

CAPS = {"can_dispatch_subagents": True}


def _dispatched(repo: Path) -> tuple[AuditService, dict[str, Any]]:
    service = AuditService(repo)
    step = first_review(service, CAPS)
    return service, json.loads(Path(step.artifact_paths["plan"]).read_text())


def _submissions(service: AuditService) -> int:
    with service.store.read() as tx:
        # Review submissions: the context packet answered before review is not what these tests send.
        sql = "SELECT COUNT(*) FROM submissions s JOIN packets p ON p.packet_id = s.packet_id WHERE p.kind = 'review'"
        return int(tx.conn.execute(sql).fetchone()[0])


def _finish(service: AuditService, plan: dict[str, Any], reviewer: ScriptedReviewer) -> None:
    for packet in plan["packets"]:
        assert service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet)).accepted
    service.merge_and_ingest(plan["run_id"], [])
    finish(service)  # the verification run the findings call for


@pytest.mark.parametrize("key", ["input_tokens", "output_tokens", "api_calls", "seconds", "rate_limited_calls"])
@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf"), 10**40, -1, 1e300])
def test_a_usage_number_that_is_not_finite_and_bounded_is_refused_at_its_place(
    repo: Path, reviewer: ScriptedReviewer, key: str, number: float
) -> None:
    service, plan = _dispatched(repo)
    packet = plan["packets"][0]
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet), {key: number})
    assert not receipt.accepted
    assert [e.location for e in receipt.errors] == [f"/usage/{key}"]
    assert _submissions(service) == 0


def test_one_poisoned_usage_number_cannot_take_down_another_repositorys_audit(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The learned state is per user: a NaN reaching it would break every audit on the machine."""
    service, plan = _dispatched(repo)
    packet = plan["packets"][0]
    poisoned = tmp_path / "poisoned.json"
    body = json.dumps({"results": reviewer.results(packet), "usage": {"input_tokens": 1}})
    for literal in ("NaN", "Infinity", "-Infinity"):
        poisoned.write_text(body.replace('"input_tokens": 1', f'"input_tokens": {literal}'))
        code, receipt = cli(
            capsys,
            "submit-packet",
            "--root",
            str(repo),
            "--run-id",
            plan["run_id"],
            "--packet-id",
            packet["packet_id"],
            "--results",
            str(poisoned),
        )
        assert code == 2 and not receipt["accepted"], receipt
        assert literal.lstrip("-") in receipt["errors"][0]["message"]
    poisoned.write_text(body.replace('"input_tokens": 1', '"rate_limited_calls": 1e999'))
    code, receipt = cli(
        capsys, "submit-packet", "--root", str(repo), "--run-id", plan["run_id"], "--packet-id",
        packet["packet_id"], "--results", str(poisoned),
    )  # fmt: skip
    assert code == 2 and not receipt["accepted"]
    _finish(service, plan, reviewer)
    other = tmp_path / "other"
    shutil.copytree(FIXTURES / "planted_app", other)
    for verb in (["next-step", "--host-can-dispatch-subagents", "true"], ["status", "--json"], ["quota"]):
        code, out = cli(capsys, verb[0], "--root", str(other), *verb[1:])
        assert code == 0 and isinstance(out, dict), out
    for verb in (["next-step"], ["status", "--json"], ["quota"]):
        code, out = cli(capsys, verb[0], "--root", str(repo), *verb[1:])
        assert code == 0 and isinstance(out, dict), out


def test_a_lone_surrogate_is_refused_with_its_location_and_never_blocks_a_report(
    repo: Path, reviewer: ScriptedReviewer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service, plan = _dispatched(repo)
    packet = next(p for p in plan["packets"] if any(t["file"] == "app/db.py" for t in p["tasks"]))
    results = reviewer.results(packet)
    index, finding = next((i, r["findings"][0]) for i, r in enumerate(results) if r["findings"])
    finding["description"] = "PLACEHOLDER"
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps(results).replace("PLACEHOLDER", "bad \\udc80 text"))  # the JSON escape itself
    code, receipt = cli(
        capsys, "submit-packet", "--root", str(repo), "--run-id", plan["run_id"], "--packet-id",
        packet["packet_id"], "--results", str(path),
    )  # fmt: skip
    assert code == 2 and not receipt["accepted"]
    assert receipt["errors"][0]["location"] == f"/results/{index}/findings/0/description"
    assert "surrogate" in receipt["errors"][0]["message"]
    assert _submissions(service) == 0
    _finish(service, plan, reviewer)
    code, step = cli(capsys, "next-step", "--root", str(repo))
    assert code == 0 and step["step_kind"] == "present_report"
    code, step = cli(capsys, "next-step", "--root", str(repo), "--new-audit")
    assert code == 0 and step["step_kind"] == "present_report"


def test_a_file_name_that_is_not_utf8_still_lets_the_report_be_written(
    tmp_path: Path, reviewer: ScriptedReviewer, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "names"
    root.mkdir()
    (root / "ok.py").write_text("def f(x):\n    return x + 1\n")
    (root / "caf\udce9.py").write_text("def g(y):\n    return y * 2\n")  # bytes b"caf\xe9.py" on disk
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "names")
    service, plan = _dispatched(root)
    for packet in plan["packets"]:
        receipt = service.submit_packet(plan["run_id"], packet["packet_id"], reviewer.results(packet))
        assert receipt.accepted, receipt.errors
    service.merge_and_ingest(plan["run_id"], [])
    assert service.next_step().step_kind == "present_report"
    code, report = cli(capsys, "report", "--root", str(root))
    assert code == 0 and "caf" in report


MALFORMED: dict[str, bytes] = {
    "deep nesting": b"[" * 100_000 + b"]" * 100_000,
    "bad bytes": b"\xff\xfe\xfa[]",
    "utf-16 with a byte-order mark": "[]".encode("utf-16"),
    "utf-16 without one": '[{"task_id": "T00001"}]'.encode("utf-16-le"),
    "5,000-digit integer": b'[{"task_id": "T00001", "n": ' + b"9" * 5_000 + b"}]",
    "NaN": b'[{"task_id": "T00001", "n": NaN}]',
    "Infinity": b'{"results": [], "usage": {"seconds": Infinity}}',
    "not JSON": b"results: none",
    "empty": b"",
    "a lone surrogate escape": b'[{"task_id": "\\ud800"}]',
    "over the size limit": b'["' + b"x" * 4_000_001 + b'"]',
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_results_file_is_a_refusal_receipt_with_exit_code_2(
    case: str, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service, plan = _dispatched(repo)
    path = tmp_path / "results.json"
    path.write_bytes(MALFORMED[case])
    code = __import__("audit_mcp.surfaces.cli", fromlist=["main"]).main(
        ["submit-packet", "--root", str(repo), "--run-id", plan["run_id"], "--packet-id",
         plan["packets"][0]["packet_id"], "--results", str(path)]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 2, captured
    receipt = json.loads(captured.out)
    assert receipt["accepted"] is False and receipt["errors"], receipt
    assert receipt["errors"][0]["location"].startswith("/") and len(receipt["errors"][0]["message"]) > 20
    assert "Traceback" not in captured.err
    assert _submissions(service) == 0


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_failures_file_is_a_refusal_with_exit_code_2(
    case: str, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service, plan = _dispatched(repo)
    path = tmp_path / "failures.json"
    path.write_bytes(MALFORMED[case])
    code, out = cli(
        capsys, "merge-and-ingest", "--root", str(repo), "--run-id", plan["run_id"], "--failures", str(path)
    )
    assert code == 2, out
    assert out["accepted"] is False and out["errors"][0]["location"].startswith("/failures"), out
    with service.store.read() as tx:
        assert tx.run(plan["run_id"], plan=False).state == "open"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("failures", "where"),
    [
        ([{"packet_id": "A9-R9-P99", "error": "429"}], "/failures/0/packet_id"),
        ([{"packet_id": 7, "error": "x"}], "/failures/0/packet_id"),
        ([{"packet_id": "PLACE", "error": ["not", "text"]}], "/failures/0/error"),
        ([{"packet_id": "PLACE", "error": "\ud800"}], "/failures/0/error"),
        (["just text"], "/failures/0"),
    ],
)
def test_a_bad_failures_list_is_refused_before_anything_changes(
    repo: Path, failures: list[Any], where: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    service, plan = _dispatched(repo)
    real = plan["packets"][0]["packet_id"]
    failures = json.loads(json.dumps(failures).replace("PLACE", real)) if "\ud800" not in str(failures) else failures
    for item in failures:
        if isinstance(item, dict) and item.get("packet_id") == "PLACE":
            item["packet_id"] = real
    with pytest.raises(Exception, match="Nothing changed") as caught:
        service.merge_and_ingest(plan["run_id"], failures)
    assert where in str(caught.value)
    with service.store.read() as tx:
        assert tx.run(plan["run_id"], plan=False).state == "open"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_over_mcp_malformed_results_and_failures_are_refusals_that_say_what_is_wrong(repo: Path) -> None:
    async with Client(build_server(repo)) as client:
        step = (await client.call_tool("next_step", {"host_can_dispatch_subagents": True})).structured_content
        assert step is not None
        plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
        ids = {"run_id": plan["run_id"], "packet_id": plan["packets"][0]["packet_id"]}
        for text in ("[" * 100_000, '[{"n": ' + "9" * 5_000 + "}]", '[{"n": NaN}]', '[{"t": "\\udc80"}]', "{"):
            result = await client.call_tool("submit_packet", {**ids, "results": text})
            receipt = result.structured_content
            assert not result.is_error and receipt is not None and not receipt["accepted"]
            assert receipt["errors"][0]["location"].startswith("/results")
        result = await client.call_tool("submit_packet", {**ids, "results": [{"task_id": "\udc80"}]})
        assert result.structured_content is not None
        assert result.structured_content["errors"][0]["location"] == "/results/0/task_id"
        bad = [{"packet_id": "A9-R9-P99", "error": "boom"}]
        result = await client.call_tool("merge_and_ingest", {"run_id": plan["run_id"], "failures": bad})
        assert result.is_error and "/failures/0/packet_id" in result.content[0].text  # type: ignore[union-attr]
        assert "Nothing changed" in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "summary",
    [
        "Looks good to me, nothing to report here",
        "I reviewed this file and found no issues at all.",
        "Everything looks fine, no problems spotted in the code.",
        "LGTM!!! nothing obvious, nothing found, all good here",
    ],
)
def test_a_summary_that_names_nothing_examined_is_refused(repo: Path, reviewer: ScriptedReviewer, summary: str) -> None:
    service, plan = _dispatched(repo)
    packet = plan["packets"][0]
    results = reviewer.results(packet)
    clear = next(i for i, r in enumerate(results) if not r["findings"])
    results[clear]["summary"] = summary
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
    assert not receipt.accepted and [e.location for e in receipt.errors] == [f"/results/{clear}/summary"]


def test_control_characters_and_bidi_overrides_are_removed_from_reviewer_text(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    service, plan = _dispatched(repo)
    packet = next(p for p in plan["packets"] if any(t["file"] == "app/db.py" for t in p["tasks"]))
    results = reviewer.results(packet)
    finding = next(r["findings"][0] for r in results if r["findings"])
    finding["title"] = "\x1b[31mRed\x1b[0m title\x07 with \u202eevil\u202c bidi"
    finding["description"] += "\r\nsecond line\x00"
    assert service.submit_packet(plan["run_id"], packet["packet_id"], results).accepted
    with service.store.read() as tx:
        stored = json.dumps(tx.submission(packet["packet_id"]))
    assert "\\u001b" not in stored and "\\u0007" not in stored and "\\u202e" not in stored
    assert "\\u0000" not in stored and "\\r" not in stored
    assert "[31mRed[0m title with evil bidi" in stored


def test_two_identical_submissions_that_race_are_one_submission(repo: Path, reviewer: ScriptedReviewer) -> None:
    service, plan = _dispatched(repo)
    packet = plan["packets"][0]
    results = reviewer.results(packet)
    read_lines = service.read_lines
    raced: list[bool] = []

    def racing_read(path: str) -> list[str] | None:
        # While the first submission is being checked, an identical one is checked and committed.
        if not raced:
            raced.append(True)
            assert service.submit_packet(plan["run_id"], packet["packet_id"], results).accepted
        return read_lines(path)

    service.read_lines = racing_read  # type: ignore[method-assign]
    receipt = service.submit_packet(plan["run_id"], packet["packet_id"], results)
    assert raced and receipt.accepted and receipt.duplicate
    assert not any("replaced" in w.message for w in receipt.warnings)
    with service.store.read() as tx:
        entries = [e for e in tx.ledger(1) if e["action"] == "submit_packet" and packet["packet_id"] in e["detail"]]
    assert len(entries) == 1 and "replaced" not in entries[0]["detail"]
