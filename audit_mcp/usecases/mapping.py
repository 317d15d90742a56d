"""What review packets' maps are drawn from: the code map's edges touching their files, its entry points,
the audit's threat model, and the checkout's files read (confined to the root) once per batch of prompts."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from audit_mcp.core.errors import PathError
from audit_mcp.core.fs import read_head
from audit_mcp.engine.codemap.graph import CodeGraph
from audit_mcp.engine.codemap.packet_map import MapInputs, map_tokens
from audit_mcp.store.tx import Tx
from audit_mcp.usecases.workspace import Workspace

READ_CAP = 2_000_000  # the head of a file a map quotes from; a map quotes a few lines of it


def map_inputs(ws: Workspace, tx: Tx, audit_id: int, paths: Collection[str], budget: int) -> MapInputs:
    """The map inputs for packets over ``paths`` of a packet ``budget`` (read from the store now; files read as
    prompts need them)."""
    graph = CodeGraph(tx.map_edges_touching(audit_id, paths))
    row = tx.threat_model(audit_id)
    cache: dict[str, Sequence[str] | None] = {}

    def lines(path: str) -> Sequence[str] | None:
        if path not in cache:
            try:
                text = read_head(ws.root, path, READ_CAP).decode("utf-8", "replace")
            except PathError:
                cache[path] = None
            else:
                cache[path] = text.splitlines()
        return cache[path]

    model = row.model if row is not None else None
    budget_chars = int(map_tokens(budget) * 2.5)
    return MapInputs(graph, lines, tx.entry_points(audit_id), model, budget_chars, ws.config().code_map)
