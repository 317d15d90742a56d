"""Checking a reviewer's verdicts on the earlier findings of a task (``earlier`` in its result).

``fixed`` and ``wrong`` close a finding an earlier audit reported, so they must say why and cite the code
that shows it: the citation is checked against the file as a finding's evidence is. ``still_present`` keeps it
open (as silence does). A reference that is not one of the task's earlier findings, or one answered twice, is
refused with the references the task has.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from audit_mcp.engine.checks import Outcome
from audit_mcp.store.records import Cell

# (outcome, object, location, allowed files) -> (path, start, end, lines) or None: the validator's own checks.
Locate = Callable[[Outcome, Mapping[str, Any], str], "tuple[str, int, int, list[str]] | None"]
# (outcome, location, path, start, end, lines, evidence) -> (start, end), (0, 0) when it is not there.
CheckEvidence = Callable[[Outcome, str, str, int, int, list[str], str], tuple[int, int]]
Text = Callable[[Outcome, Mapping[str, Any], str, str], "str | None"]


def check_earlier(
    out: Outcome,
    raw: Any,
    cell: Cell,
    status: Any,
    loc: str,
    refs: Collection[str],
    bad: Collection[int],
    locate: Locate,
    check_evidence: CheckEvidence,
    text: Text,
) -> list[dict[str, Any]]:
    """The task's verdicts on its earlier findings, each checked; ``bad`` holds the indexes whose shape is
    already refused, ``refs`` the references the packet prompt listed for this task."""
    if not raw:
        return []
    if status != "reviewed":
        out.error(f"{loc}/earlier", f"a task with status {status} cannot judge earlier findings; use status reviewed")
        return []
    known = ", ".join(sorted(refs)) or "none"
    seen: set[str] = set()
    clean = []
    for k, item in enumerate(raw):
        if k in bad:
            continue
        eloc = f"{loc}/earlier/{k}"
        ref = item["ref"]
        if ref not in refs:
            out.error(f"{eloc}/ref", f"{ref!r} is not an earlier finding of task {cell.task_id}; its are: {known}")
            continue
        if ref in seen:
            out.error(f"{eloc}/ref", f"{ref} is answered twice; give one verdict per earlier finding")
            continue
        seen.add(ref)
        verdict = item["verdict"]
        reason = text(out, item, "reason", eloc)
        answer: dict[str, Any] = {"ref": ref, "verdict": verdict}
        if reason:
            answer["reason"] = reason
        if verdict in ("fixed", "wrong"):
            if not reason:
                out.error(f"{eloc}/reason", f"'{verdict}' needs a reason: say what in the code shows it")
            cited = item.get("cited")
            if not isinstance(cited, Mapping):
                what = "the lines that fix it" if verdict == "fixed" else "the control that makes the code safe"
                out.error(f"{eloc}/cited", f"'{verdict}' needs 'cited': {what}, quoted verbatim with their lines")
                continue
            place = locate(out, cited, f"{eloc}/cited")
            if place is None:
                continue
            path, start, end, lines = place
            start, end = check_evidence(out, f"{eloc}/cited", path, start, end, lines, cited["evidence"])
            if start == 0:
                continue
            answer["cited"] = {"file": path, "start_line": start, "end_line": end, "evidence": cited["evidence"]}
        clean.append(answer)
    return clean
