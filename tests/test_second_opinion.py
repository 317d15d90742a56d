"""The second opinion, end to end: a threat model before review, verifiers after it, runtime evidence, the
report and SARIF, through an MCP client and through the command line, with the demo's answer key (its
planted defects, its decoys: two false findings, one overstated and one duplicate)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt
from mcp import Client

from audit_mcp.surfaces.scripted import AnswerKeyReviewer
from audit_mcp.surfaces.server import build_server
from tests.driving import cli

CAPS = {"host_can_dispatch_subagents": True, "host_max_active_subagents": 4}


def _text(result: Any) -> str:
    return str(result.contents[0].text)


def _leading_block(prompt: str) -> str:
    return prompt.split("# Your assignment", 1)[0]


def _by_title(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f["title"]: f for f in items}


def _check_report(doc: dict[str, Any], sarif: dict[str, Any], key: dict[str, Any]) -> None:
    decoys = {d["id"]: d for d in key["decoys"]}
    refuted = _by_title(doc["refuted"])
    kept = _by_title(doc["findings"])
    for decoy in decoys.values():
        if decoy["truth"] == "false_positive":
            assert decoy["title"] in refuted and decoy["title"] not in kept
            assert refuted[decoy["title"]]["status"] == "refuted"
            why = refuted[decoy["title"]]["verification"]
            assert why["verdict"] == "false_positive" and why["cited"][0]["role"] == "control"
    overstated = kept[decoys["overstated-predictable-request-id"]["title"]]
    assert (overstated["status"], overstated["severity"], overstated["original_severity"]) == (
        "overstated",
        "low",
        "high",
    )
    xss = next(f for f in doc["findings"] if f["category_id"] == "CWE-79")
    assert xss["merged_duplicates"] and sorted(xss["lenses"]) == ["correctness", "security"]
    assert doc["verification"]["counts"]["refuted"] == 2
    assert doc["threat_model"]["entry_points"] and doc["context"]["state"] == "reviewed"
    for issue in key["issues"]:
        if issue["severity"] in ("critical", "high"):
            assert kept[issue["title"]]["status"] == "confirmed"
    assert doc["completeness"] == "complete"
    assert doc["coverage"]["by_kind"]["verify"] == {"reviewed": 8}

    results = sarif["runs"][0]["results"]
    suppressed = [r for r in results if r.get("suppressions")]
    assert len(suppressed) == 2 and all(r["properties"]["refuted"] for r in suppressed)
    assert all(
        s["kind"] == "external" and s["justification"].startswith("Refuted")
        for r in suppressed
        for s in r["suppressions"]
    )
    low = next(r for r in results if r["properties"].get("originalSeverity"))
    assert low["level"] == "note" and low["properties"]["verification"][0]["fairSeverity"] == "low"
    assert "ignores suppressions" in sarif["runs"][0]["properties"]["verification"]["note"]


@pytest.mark.anyio
async def test_over_mcp_the_whole_loop_from_threat_model_to_runtime_evidence(
    repo: Path, answer_key: dict[str, Any]
) -> None:
    reviewer = AnswerKeyReviewer(answer_key)
    kinds = []
    async with Client(build_server(repo)) as client:
        step = (await client.call_tool("next_step", CAPS)).structured_content
        assert step is not None
        while step["step_kind"] == "dispatch_review":
            plan = json.loads(_text(await client.read_resource(f"audit://runs/{step['run_id']}/dispatch-plan")))
            kinds.append(plan["packet_kind"])
            prompts = [_text(await client.read_resource(p["prompt_uri"])) for p in plan["packets"]]
            if plan["packet_kind"] == "context":
                assert step["obligations"]["context"] == {"pending": 0, "assigned": 1} or step["obligations"]["context"]
                assert "context packet" in (await client.read_resource("audit://step/current/prompt")).contents[0].text  # type: ignore[union-attr]
                assert "app/db.py" in prompts[0] and "Entry-point candidates" in prompts[0]
                assert "web/server.js" in prompts[0].split("Entry-point candidates", 1)[1]
            if plan["packet_kind"] == "review":
                blocks = {_leading_block(p) for p in prompts}
                assert len(blocks) == 1, "every review packet shares one leading block"
                assert answer_key["context"]["threat_model"]["summary"][:60] in blocks.pop()
            if plan["packet_kind"] == "verify":
                assert all("try to refute" in p and '"confidence"' not in p and "confidence:" not in p for p in prompts)
                assert any("are these two findings one defect?" in p for p in prompts)
            for packet in plan["packets"]:
                receipt = (
                    await client.call_tool(
                        "submit_packet",
                        {
                            "run_id": plan["run_id"],
                            "packet_id": packet["packet_id"],
                            "results": reviewer.results(packet),
                        },
                    )
                ).structured_content
                assert receipt is not None and receipt["accepted"], receipt
            merged = (await client.call_tool("merge_and_ingest", {"run_id": plan["run_id"]})).structured_content
            assert merged is not None
            if plan["packet_kind"] == "review":
                assert merged["verifications_planned"] == 8 and merged["completeness"] == "unknown"
            step = (await client.call_tool("next_step", {})).structured_content
            assert step is not None
        assert kinds == ["context", "review", "verify"]
        assert step["step_kind"] == "present_report"
        assert "runtime_evidence" in (await client.read_resource("audit://step/current/prompt")).contents[0].text  # type: ignore[union-attr]

        doc = json.loads(_text(await client.read_resource("audit://report/json")))
        sarif = json.loads(_text(await client.read_resource("audit://report/sarif")))
        _check_report(doc, sarif, answer_key)
        markdown = _text(await client.read_resource("audit://report"))
        assert "## Refuted findings" in markdown and "## Threat model" in markdown
        assert "[low, reported high] Predictable request ids" in markdown

        status = json.loads(_text(await client.read_resource("audit://status")))
        assert status["obligations"]["verification"]["cells"]["reviewed"] == 8
        assert status["obligations"]["context"]["threat_model"].startswith("context packet")
        assert status["refuted"] == 2

        # Running the code outranks reading it: a refuted finding that reproduces comes back, first of its rank.
        traversal = next(f for f in doc["refuted"] if f["file"] == "web/server.js")
        prompt = await client.get_prompt("reproduce_finding", {"finding": traversal["id"]})
        assert traversal["id"] in prompt.messages[0].content.text  # type: ignore[union-attr]
        receipt = (
            await client.call_tool(
                "runtime_evidence",
                {
                    "finding": traversal["id"],
                    "verdict": "reproduced",
                    "output": "GET /..%2f..%2fapp/config.py -> 200\n\x1b[2Jsecret```\n# injected heading",
                    "command": "curl -s localhost:3000/..%2f..%2fapp/config.py",
                },
            )
        ).structured_content
        assert receipt is not None and receipt["status"] == "reproduced" and receipt["report_updated"]
        after = json.loads(_text(await client.read_resource("audit://report/json")))
        assert traversal["title"] not in {f["title"] for f in after["refuted"]}
        back = next(f for f in after["findings"] if f["title"] == traversal["title"])
        assert (
            back["runtime_evidence"][0]["output"].startswith("GET /..")
            and "\x1b" not in back["runtime_evidence"][0]["output"]
        )
        first_high = next(b for b in after["work_blocks"] if b["severity"] == "high")
        assert first_high["findings"] == [back["id"]]
        written = (repo / ".audit-mcp" / "report" / "report.md").read_text()
        tokens = MarkdownIt("commonmark").parse(written)
        headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
        assert "Runtime evidence" in written and "injected heading" not in headings


def test_through_the_cli_the_same_loop_and_an_upload_without_refuted_results(
    repo: Path, answer_key: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reviewer = AnswerKeyReviewer(answer_key)
    root = ["--root", str(repo)]
    code, step = cli(capsys, "next-step", *root, "--host-can-dispatch-subagents", "true")
    kinds = []
    while step["step_kind"] == "dispatch_review":
        plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
        kinds.append(plan["packet_kind"])
        for packet in plan["packets"]:
            results = tmp_path / f"{packet['packet_id']}.json"
            results.write_text(json.dumps(reviewer.results(packet)))
            code, receipt = cli(
                capsys,
                "submit-packet",
                *root,
                "--run-id",
                plan["run_id"],
                "--packet-id",
                packet["packet_id"],
                "--results",
                str(results),
            )
            assert code == 0 and receipt["accepted"], receipt
        code, _ = cli(capsys, "merge-and-ingest", *root, "--run-id", plan["run_id"])
        code, step = cli(capsys, "next-step", *root)
    assert kinds == ["context", "review", "verify"] and step["step_kind"] == "present_report"
    _, doc = cli(capsys, "report", *root, "--format", "json")
    _, sarif = cli(capsys, "report", *root, "--format", "sarif")
    _check_report(doc, sarif, answer_key)
    _, upload = cli(capsys, "report", *root, "--format", "sarif", "--drop-refuted")
    assert len(upload["runs"][0]["results"]) == len(sarif["runs"][0]["results"]) - 2
    assert not any(r.get("suppressions") for r in upload["runs"][0]["results"])

    output = tmp_path / "repro.txt"
    output.write_bytes(b"AssertionError: expected 1 row, got 3\n\xff\xfe not utf-8\n")
    sqli = next(f for f in doc["findings"] if f["category_id"] == "CWE-89")
    code, receipt = cli(
        capsys,
        "runtime-evidence",
        *root,
        "--finding",
        sqli["fingerprint"],
        "--file",
        str(output),
        "--verdict",
        "not_reproduced",
        "--kind",
        "failing_test",
    )
    assert code == 0 and receipt["status"] == "not_reproduced" and receipt["finding_id"] == sqli["id"]
    _, status = cli(capsys, "status", *root, "--json")
    assert status["obligations"]["runtime_evidence"] == {"attached": 1}
    _, doc = cli(capsys, "report", *root, "--format", "json")
    evidence = next(f for f in doc["findings"] if f["id"] == sqli["id"])["runtime_evidence"]
    assert evidence[0]["kind"] == "failing_test" and "\ufffd" in evidence[0]["output"]
    code, text = cli(capsys, "runtime-evidence", *root, "--finding", sqli["id"], "--instructions")
    assert code == 0 and "Only where it is safe" in text and f"--finding {sqli['id']}" in text
    code, _ = cli(
        capsys, "runtime-evidence", *root, "--finding", "F999", "--file", str(output), "--verdict", "reproduced"
    )
    assert code == 1


def test_the_demo_still_says_plainly_that_its_reviews_and_verdicts_are_scripted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = cli(capsys, "demo", "--dir", str(tmp_path / "demo"))
    assert code == 0 and isinstance(out, str)
    assert "The reviews are SCRIPTED" in out and "decoys and verdicts; no model judged this code" in out
    report = (tmp_path / "demo" / "planted_app" / ".audit-mcp" / "report" / "report.md").read_text()
    assert "## Refuted findings" in report and "[low, reported high]" in report and "## Threat model" in report
