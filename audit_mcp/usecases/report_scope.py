"""What a report says of its scope: why an audit without a cell proves nothing, what the config's patterns left
out, and which cells were carried from earlier audits."""

from __future__ import annotations

from collections.abc import Sequence

from audit_mcp.core.config import CONFIG_FILENAME, REPOSITORY_CONFIG
from audit_mcp.engine.incremental import carried_from
from audit_mcp.engine.intake import LEFT_OUT_BY_CONFIG
from audit_mcp.store.records import Cell, CellState, FileRow


def empty_reason(files: Sequence[FileRow]) -> str:
    """Why an audit without a single cell is not complete."""
    skipped = sum(1 for f in files if f.scope == "skipped")
    if not files:
        return (
            "Nothing was reviewed: no file of the repository is in the audit's scope (check the include and "
            "exclude globs of the config, and since); an audit that reviewed nothing proves nothing."
        )
    return (
        f"Nothing was reviewed: all {len(files)} file(s) in the include and exclude scope were skipped "
        f"({skipped} skipped, each with its reason under Gaps); an audit that reviewed nothing proves nothing."
    )


def carried_counts(cells: Sequence[Cell]) -> dict[int, int]:
    """Cells carried unchanged from earlier reviews, by the audit that reviewed them."""
    out: dict[int, int] = {}
    for cell in cells:
        if cell.state == CellState.CARRIED and (source := carried_from(cell.reason)) is not None:
            out[source] = out.get(source, 0) + 1
    return out


def scope_reason(files: Sequence[FileRow]) -> str | None:
    """What the config's include and exclude patterns left out, when they left anything out: "complete" then
    holds for the configured scope only, and a repository's own config is the code under audit's choice."""
    left_out = [f for f in files if f.scope == "skipped" and (f.skip_reason or "").startswith(LEFT_OUT_BY_CONFIG)]
    if not left_out:
        return None
    own = sum(1 for f in left_out if REPOSITORY_CONFIG in (f.skip_reason or ""))
    by_repo = (
        f" ({own} of them by the repository's own {CONFIG_FILENAME}, which the code under audit wrote)" if own else ""
    )
    return (
        f"Scope: {len(left_out)} file(s) are left out by the config's include or exclude patterns{by_repo}, so "
        "completeness holds for the configured scope only; each is listed under Gaps with the rule that left it out."
    )
