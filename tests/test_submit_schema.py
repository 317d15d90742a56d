"""submit_packet's published input schema comes from the same models as the first half of validation: every
field is described, and on a corpus of submissions the schema and the server agree on what is wrong, and where."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client

from audit_mcp.surfaces.server import build_server
from tests.conftest import ScriptedReviewer
from tests.driving import first_review_over_mcp

LONG = "x" * 5_000
DELETE = object()  # a mutation that removes the field


def _described(schema: dict[str, Any], where: str = "") -> Iterator[str]:
    """Every property of every object in ``schema`` that has no description."""
    for name, spec in schema.get("properties", {}).items():
        if not str(spec.get("description", "")).strip():
            yield f"{where}/{name}"
    for name, sub in schema.get("$defs", {}).items():
        yield from _described(sub, f"$defs/{name}")


def _leaf_errors(error: jsonschema.ValidationError) -> Iterator[jsonschema.ValidationError]:
    if error.context:
        for sub in error.context:
            yield from _leaf_errors(sub)
    else:
        yield error


def _pointer(path: Any) -> str:
    return "".join(f"/{p}" for p in path)


def schema_pointers(schema: dict[str, Any], arguments: dict[str, Any]) -> set[str]:
    """Where the published schema says ``arguments`` are wrong: the place itself, and for a missing property
    the object plus the property's name."""
    found = set()
    for error in jsonschema.Draft202012Validator(schema).iter_errors(arguments):
        for leaf in _leaf_errors(error):
            at = _pointer(leaf.absolute_path)
            if leaf.validator == "required":
                missing = str(leaf.message).split("'")[1]
                found.add(f"{at}/{missing}")
            else:
                found.add(at)
    return found


def _set(doc: Any, pointer: str, value: Any) -> None:
    *parents, last = pointer.strip("/").split("/")
    for part in parents:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    if value is DELETE:
        del doc[last]
    elif isinstance(doc, list):
        doc[int(last)] = value
    else:
        doc[last] = value


FINDING = "/results/0/findings/0"
TASK = "/results/0"
# (where, the bad value): every field's type, choices, bounds and presence.
MUTATIONS: list[tuple[str, Any]] = [
    (f"{TASK}/status", "done"),
    (f"{TASK}/status", 5),
    (f"{TASK}/status", DELETE),
    (f"{TASK}/summary", 7),
    (f"{TASK}/summary", "   "),
    (f"{TASK}/summary", LONG),
    (f"{TASK}/summary", DELETE),
    (f"{TASK}/reason", LONG),
    (f"{TASK}/findings", "none"),
    (f"{TASK}/findings", {"title": "x"}),
    (f"{TASK}/leads", "none"),
    (f"{TASK}/leads", [3]),
    (f"{FINDING}/title", DELETE),
    (f"{FINDING}/title", 5),
    (f"{FINDING}/title", ""),
    (f"{FINDING}/title", LONG),
    (f"{FINDING}/severity", "urgent"),
    (f"{FINDING}/severity", DELETE),
    (f"{FINDING}/confidence", "sure"),
    (f"{FINDING}/category", 3),
    (f"{FINDING}/category", LONG),
    (f"{FINDING}/file", 5),
    (f"{FINDING}/file", DELETE),
    (f"{FINDING}/start_line", 0),
    (f"{FINDING}/start_line", "3"),
    (f"{FINDING}/start_line", 2.5),
    (f"{FINDING}/start_line", True),
    (f"{FINDING}/end_line", -1),
    (f"{FINDING}/end_line", DELETE),
    (f"{FINDING}/evidence", "short"),
    (f"{FINDING}/evidence", 7),
    (f"{FINDING}/evidence", "y" * 2_001),
    (f"{FINDING}/description", DELETE),
    (f"{FINDING}/recommendation", 5),
    (f"{FINDING}/symbol", 3),
    (f"{FINDING}/symbol", LONG),
    (f"{FINDING}/related_locations", "x"),
    (f"{FINDING}/related_locations", [3]),
    (f"{FINDING}/related_locations", [{"file": "app/db.py", "start_line": 1, "end_line": 1}] * 11),
    (f"{FINDING}/related_locations", [{"start_line": 1, "end_line": 1}]),
    (f"{FINDING}/related_locations", [{"file": "app/db.py", "start_line": 0, "end_line": 1}]),
    (f"{FINDING}/related_locations", [{"file": "app/db.py", "start_line": 1, "end_line": 1, "role": 5}]),
    ("/results/0/findings/1", 3),
    ("/usage", "fast"),
    ("/usage/seconds", -1),
    ("/usage/seconds", True),
    ("/usage/api_calls", "3"),
    ("/usage/input_tokens", 1e12),
]
# Where the bad value sits, when the mutation puts it deeper than the field it replaces.
DEEPER = {
    "/results/0/findings/0/related_locations:3": "/results/0/findings/0/related_locations/0",
    "/results/0/findings/0/related_locations:nofile": "/results/0/findings/0/related_locations/0/file",
    "/results/0/findings/0/related_locations:start0": "/results/0/findings/0/related_locations/0/start_line",
    "/results/0/findings/0/related_locations:role": "/results/0/findings/0/related_locations/0/role",
    "/results/0/leads:3": "/results/0/leads/0",
}


def _expected(where: str, value: Any) -> str:
    if where.endswith("related_locations") and isinstance(value, list) and len(value) == 1:
        item = value[0]
        key = (
            "3"
            if not isinstance(item, dict)
            else "nofile"
            if "file" not in item
            else "start0"
            if item["start_line"] == 0
            else "role"
        )
        return DEEPER[f"{where}:{key}"]
    if where.endswith("/leads") and value == [3]:
        return DEEPER[f"{where}:3"]
    return where


async def _full_schema(client: Client) -> dict[str, Any]:
    """The described schema of a submission (the tool's own input schema is its skeleton)."""
    contents = (await client.read_resource("audit://schemas/submission")).contents[0]
    schema: dict[str, Any] = json.loads(contents.text)  # type: ignore[union-attr]
    return schema


async def _packet_and_schema(client: Client, reviewer: ScriptedReviewer) -> tuple[dict[str, Any], dict[str, Any]]:
    step = await first_review_over_mcp(client)
    plan = json.loads(Path(step["artifact_paths"]["plan"]).read_text())
    packet = next(p for p in plan["packets"] if any(f["findings"] for f in reviewer.results(p)))
    results = reviewer.results(packet)
    results.sort(key=lambda r: not r["findings"])  # the task with a finding first
    results[0]["findings"] = results[0]["findings"][:1] * 2
    arguments = {
        "run_id": plan["run_id"],
        "packet_id": packet["packet_id"],
        "results": results,
        "usage": {"input_tokens": 12_000, "output_tokens": 900, "api_calls": 6, "seconds": 95},
    }
    return arguments, await _full_schema(client)


async def _server_pointers(client: Client, arguments: dict[str, Any]) -> tuple[bool, set[str]]:
    reply = await client.call_tool("submit_packet", arguments)
    receipt = reply.structured_content
    assert receipt is not None, reply.content
    return receipt["accepted"], {e["location"] for e in receipt["errors"]}


@pytest.mark.anyio
async def test_the_submit_packet_schema_describes_every_field(repo: Path) -> None:
    async with Client(build_server(repo)) as client:
        schema = await _full_schema(client)
        lean = next(t for t in (await client.list_tools()).tools if t.name == "submit_packet").input_schema
    assert list(_described(schema)) == []
    results = lean["properties"]["results"]["anyOf"][0]["items"]
    assert results["properties"]["findings"]["items"]["properties"]["severity"]["enum"] == [
        "critical",
        "high",
        "medium",
        "low",
        "info",
    ]
    assert set(results["required"]) >= {"task_id", "status", "summary"}
    finding = schema["$defs"]["Finding"]
    assert finding["properties"]["severity"]["enum"] == ["critical", "high", "medium", "low", "info"]
    assert finding["properties"]["title"]["maxLength"] == 200
    assert finding["properties"]["start_line"]["minimum"] == 1
    assert schema["$defs"]["TaskResult"]["properties"]["findings"]["anyOf"][0]["maxItems"] == 50
    assert set(schema["$defs"]["Finding"]["required"]) >= {"title", "severity", "file", "evidence", "start_line"}


@pytest.mark.anyio
async def test_the_published_schema_and_the_validator_agree_on_a_corpus(repo: Path, reviewer: ScriptedReviewer) -> None:
    async with Client(build_server(repo)) as client:
        valid, schema = await _packet_and_schema(client, reviewer)
        assert schema_pointers(schema, valid) == set()
        lean = next(t for t in (await client.list_tools()).tools if t.name == "submit_packet").input_schema
        assert schema_pointers(lean, valid) == set()  # the tool's skeleton takes every valid submission
        for where, value in MUTATIONS:
            arguments = copy.deepcopy(valid)
            _set(arguments, where, value)
            expected = _expected(where, value)
            by_schema = schema_pointers(schema, arguments)
            accepted, by_server = await _server_pointers(client, arguments)
            assert expected in by_schema, (where, value, by_schema)
            assert not accepted and expected in by_server, (where, value, by_server)
        # Fifty-one findings: both say the array is too long, at the array.
        arguments = copy.deepcopy(valid)
        arguments["results"][0]["findings"] = arguments["results"][0]["findings"][:1] * 51
        assert f"{TASK}/findings" in schema_pointers(schema, arguments)
        assert f"{TASK}/findings" in (await _server_pointers(client, arguments))[1]
        assert await _server_pointers(client, valid) == (True, set())


@pytest.mark.anyio
async def test_what_only_the_files_can_tell_passes_the_schema_and_is_refused_with_its_place(
    repo: Path, reviewer: ScriptedReviewer
) -> None:
    async with Client(build_server(repo)) as client:
        valid, schema = await _packet_and_schema(client, reviewer)
        cases = [
            (f"{FINDING}/evidence", "this text is nowhere in the file"),
            (f"{FINDING}/file", "app/not_in_this_packet.py"),
            (f"{FINDING}/end_line", 100_000),
            (f"{TASK}/task_id", "T99999"),
        ]
        for where, value in cases:
            arguments = copy.deepcopy(valid)
            _set(arguments, where, value)
            assert schema_pointers(schema, arguments) == set(), where
            accepted, by_server = await _server_pointers(client, arguments)
            assert not accepted and where in by_server, (where, by_server)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("failures", "where"),
    [
        ([3], "/failures/0"),
        ([{"error": "429"}], "/failures/0/packet_id"),
        ([{"packet_id": 5, "error": "429"}], "/failures/0/packet_id"),
        ([{"packet_id": "A1-R1-P01", "error": 5}], "/failures/0/error"),
    ],
    ids=["not-an-object", "no-packet", "packet-not-a-string", "error-not-text"],
)
async def test_the_merge_schema_and_the_server_agree_on_bad_failures(
    repo: Path, failures: list[Any], where: str
) -> None:
    async with Client(build_server(repo)) as client:
        schema = next(t for t in (await client.list_tools()).tools if t.name == "merge_and_ingest").input_schema
        result = await client.call_tool("next_step", {"host_can_dispatch_subagents": True})
        run_id = result.structured_content["run_id"]  # type: ignore[index]
        arguments = {"run_id": run_id, "failures": failures}
        assert where in schema_pointers(schema, arguments)
        refused = await client.call_tool("merge_and_ingest", arguments)
    assert refused.is_error and f"{where}: " in refused.content[0].text  # type: ignore[union-attr]
    good = {"run_id": run_id, "failures": [{"packet_id": "A1-R1-P01", "error": "429 Too Many Requests"}]}
    assert schema_pointers(schema, good) == set()
    assert list(_described(schema)) == []
