"""Over stdio, a line the server cannot read is answered at once with a JSON-RPC error (and the request's id
where one can be read), never left without a reply; the server goes on serving."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.surfaces.stdio import request_id

EXE = str(Path(sys.executable).with_name("audit-mcp"))
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def _line(message: dict[str, Any]) -> str:
    return json.dumps(message) + "\n"


def _exchange(repo: Path, lines: list[str]) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [EXE, "serve", "--root", str(repo)], input="".join(lines), capture_output=True, text=True, timeout=60
    )
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def test_unreadable_lines_get_an_error_with_their_id_and_the_server_goes_on(repo: Path) -> None:
    nested = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"a":' + "[" * 100_000
    nested += "]" * 100_000 + "}}}\n"
    surrogate = '{"jsonrpc":"2.0","id":"eight","method":"tools/call","params":{"name":"x\\ud800","arguments":{}}}\n'
    digits = '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x","arguments":{"n":' + "9" * 5000
    digits += "}}}\n"
    huge_id = '{"jsonrpc":"2.0","id":' + "9" * 5000 + ',"method":"ping"}\n'
    no_method = '{"jsonrpc":"2.0","id":11,"method":5}\n'
    answers = _exchange(
        repo,
        [nested, surrogate, digits, huge_id, no_method, _line(INIT)],
    )
    by_id = {a.get("id"): a for a in answers}
    for request in (7, "eight", 9):
        assert by_id[request]["error"]["code"] == -32700, by_id[request]
        assert "nothing was done" in by_id[request]["error"]["message"]
    assert by_id[11]["error"]["code"] == -32600
    assert by_id[None]["error"]["code"] == -32700  # an id of 5,000 digits cannot be echoed
    assert by_id[1]["result"]["serverInfo"]["name"] == "audit-mcp"  # and it serves on


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"id": 3, "method": "x"}', 3),
        ('{"params": {"id": 5}, "id": "top"}', "top"),
        ('{"params": [{"id": 5}], "method": "m"}', None),
        ('{"a": "\\"id\\": 4", "id": -2}', -2),
        ('{"id": 1.5}', None),
        ('{"id": "has\\"quote"}', None),
        ("[" * 50_000, None),
        ('{"id": ' + "1" * 40 + "}", None),
    ],
    ids=["number", "nested-id-ignored", "only-nested", "quoted-key-in-value", "fraction", "escaped", "deep", "long"],
)
def test_the_id_is_read_from_the_top_level_only(raw: str, expected: object) -> None:
    assert request_id(raw) == expected
