"""The scripted reviewer: it replays an answer key and judges nothing.

It answers every kind of packet the way a host's subagents would, from what the key says: a context
packet with the key's threat model, a review packet with the defects planted in its tasks (the key's
``issues``, and its ``decoys``: reports a careless reviewer would make), a verification packet with the
verdict the key gives (a decoy's ``verification``; a planted defect is confirmed, citing its own lines).
The demo and the tests use it to drive the orchestration end to end; no model's judgement is involved.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

FINDING_FIELDS = (
    "title",
    "severity",
    "confidence",
    "category",
    "file",
    "start_line",
    "end_line",
    "evidence",
    "description",
    "recommendation",
    "symbol",
    "related_locations",
)
_ROOT = re.compile(r"^Repository root: `(.+?)`", re.M)
_FALLBACK_MODEL = {
    "summary": "Scripted context: the answer key holds no threat model, so this one only says that much.",
    "entry_points": [{"path": ".", "name": "the repository", "exposure": "other", "reached_by": "not known"}],
}


class AnswerKeyReviewer:
    """Answers packets of every kind from an answer key (``issues``, optional ``decoys`` and ``context``)."""

    def __init__(self, key: Mapping[str, Any], *, decoys: bool = True) -> None:
        self.issues: list[dict[str, Any]] = list(key["issues"])
        self.decoys: list[dict[str, Any]] = list(key.get("decoys", [])) if decoys else []
        self.context: Mapping[str, Any] | None = key.get("context")
        self.reported: set[str] = set()

    @property
    def entries(self) -> list[dict[str, Any]]:
        return [*self.issues, *self.decoys]

    def results(self, packet: Mapping[str, Any]) -> list[dict[str, Any]]:
        kind = packet.get("packet_kind", "review")
        if kind == "context":
            return [self._context(task) for task in packet["tasks"]]
        if kind == "verify":
            return [self._verify(packet, task) for task in packet["tasks"]]
        return [self._review(task) for task in packet["tasks"]]

    def review_summary(self, task: Mapping[str, Any]) -> str:
        return (
            f"Scripted: {task['file']} lines {task['start_line']}-{task['end_line']} under the {task['lens']} lens; "
            "reported the answer key's planted defects there."
        )

    def _review(self, task: Mapping[str, Any]) -> dict[str, Any]:
        findings = []
        for entry in self.entries:
            if (
                entry["file"] == task["file"]
                and entry["lens"] == task["lens"]
                and task["start_line"] <= entry["start_line"] <= task["end_line"]
            ):
                self.reported.add(entry["id"])
                findings.append({k: entry[k] for k in FINDING_FIELDS if k in entry})
        return {
            "task_id": task["task_id"],
            "status": "reviewed",
            "summary": self.review_summary(task),
            "findings": findings,
        }

    def _context(self, task: Mapping[str, Any]) -> dict[str, Any]:
        context = self.context or {}
        return {
            "task_id": task["task_id"],
            "status": "reviewed",
            "summary": context.get(
                "summary", "Scripted context: replayed the answer key's threat model without reading the code."
            ),
            "threat_model": context.get("threat_model", _FALLBACK_MODEL),
        }

    def _verify(self, packet: Mapping[str, Any], task: Mapping[str, Any]) -> dict[str, Any]:
        head = {
            "task_id": task["task_id"],
            "status": "reviewed",
            "summary": f"Scripted verifier: replayed the answer key's verdict for {task['file']} lines "
            f"{task['start_line']}-{task['end_line']} instead of reading the code.",
        }
        if str(task.get("subject", "")).startswith("pair:"):
            return head | self._pair(packet, task)
        entry = next(
            (e for e in self.entries if e["file"] == task["file"] and e["start_line"] == task["start_line"]), None
        )
        if entry is not None and entry.get("verification", {}).get("verdict"):
            return head | dict(entry["verification"])
        if entry is not None:
            cited = {k: entry[k] for k in ("file", "start_line", "end_line")} | {"quote": entry["evidence"]}
            return head | {
                "verdict": "confirmed",
                "rationale": "Scripted: the answer key plants this defect at these lines.",
                "cited": [cited | {"role": "sink"}],
            }
        return head | {
            "verdict": "likely",
            "rationale": "Scripted: the answer key does not know this finding, so it is neither confirmed nor refuted.",
            "cited": [_quote(packet, task)],
        }

    def _pair(self, packet: Mapping[str, Any], task: Mapping[str, Any]) -> dict[str, Any]:
        inside = [
            e
            for e in self.entries
            if e["file"] == task["file"] and task["start_line"] <= e["start_line"] <= task["end_line"]
        ]
        same = next((e for e in inside if "same_defect" in e), None)
        if same is not None:
            return {"same_defect": bool(same["same_defect"])} | dict(same["verification"])
        return {
            "same_defect": False,
            "rationale": "Scripted: the answer key plants these as two defects (or does not know them).",
            "cited": [_quote(packet, task)],
        }


def _quote(packet: Mapping[str, Any], task: Mapping[str, Any]) -> dict[str, Any]:
    """The task's own lines as a citation, read from the repository its prompt names."""
    prompt = Path(packet["prompt_path"]).read_text(encoding="utf-8")
    found = _ROOT.search(prompt)
    root = Path(found.group(1)) if found else Path.cwd()
    lines = (root / task["file"]).read_text(encoding="utf-8").splitlines()
    start, end = task["start_line"], task["end_line"]
    return {"file": task["file"], "start_line": start, "end_line": end, "quote": "\n".join(lines[start - 1 : end])}


def expected_verdicts(key: Mapping[str, Any]) -> Sequence[tuple[str, str]]:
    """(decoy id, what the scripted verifier makes of it) for the key's decoys."""
    return [(d["id"], d.get("truth", "")) for d in key.get("decoys", [])]
