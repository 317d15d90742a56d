"""Reading a run's dispatch plan the way hosts can: a page of it, or one wave's launch list."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from audit_mcp.core.errors import ConfigError, NotFoundError
from audit_mcp.core.text import id_problem
from audit_mcp.engine.plan_pages import plan_page, wave_doc
from audit_mcp.usecases import packet_render
from audit_mcp.usecases.workspace import Workspace


def plan_view(
    ws: Workspace, run_id: str, *, cursor: str | None = None, limit: int | None = None, wave: int | None = None
) -> dict[str, Any]:
    """A page of run ``run_id``'s plan (from ``cursor``, at most ``limit`` packets), or wave ``wave`` of it."""
    if problem := id_problem("run_id", run_id):
        raise ConfigError(problem)
    path = ws.plan_path(run_id)
    if "/" not in run_id and not path.is_file():
        packet_render.plan_file(ws, run_id)  # another host dispatched it: this host's copy, from the store
    if "/" in run_id or not path.is_file():
        raise NotFoundError(
            f"run {run_id!r} has no dispatch plan in {ws.artifacts_dir}; take the run id from the current step "
            "(audit://step/current), or call next_step first"
        )
    stat = path.stat()
    plan = _parsed(path, stat.st_mtime_ns, stat.st_size)
    if wave is None:
        return plan_page(plan, cursor, limit)
    doc = wave_doc(plan, wave)
    # A host reading a wave's launch list is about to launch it: its prompts exist before it does.
    packet_render.write_prompts(ws, run_id, [p["packet_id"] for p in doc["packets"]])
    return doc


@lru_cache(maxsize=4)
def _parsed(path: Path, _mtime_ns: int, _size: int) -> dict[str, Any]:
    """A plan file, parsed once while it is unchanged: a host walking 200 packets reads it page by page."""
    plan: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return plan
