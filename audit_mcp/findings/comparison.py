"""Comparing an audit with the previous audit of the same repository, finding by finding.

Pure: two syntheses in, a state per finding out. Findings are matched by
fingerprint (any of the fingerprints a merged finding carries), so line
shifts and re-indentation do not turn an old finding into a new one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from audit_mcp.findings.synthesis import Finding, Synthesis
from audit_mcp.store.records import Resolution

NEW, PERSISTING, RESOLVED, NOT_RECHECKED = "new", "persisting", "resolved", "not_rechecked"
SARIF_BASELINE = {NEW: "new", PERSISTING: "unchanged", RESOLVED: "absent"}


@dataclass(frozen=True)
class Comparison:
    baseline_audit_id: int
    states: dict[str, str]
    """State of each current finding, by its fingerprint: new or persisting."""
    resolved: list[Finding]
    """Previous findings this audit no longer reports, where it reviewed the file again."""
    not_rechecked: list[Finding]
    """Previous findings in places this audit did not review again: neither fixed nor confirmed."""
    why: dict[str, str] = field(default_factory=dict)
    """Why each resolved finding is resolved, by its fingerprint."""

    def counts(self) -> dict[str, int]:
        values = list(self.states.values())
        return {
            NEW: values.count(NEW),
            PERSISTING: values.count(PERSISTING),
            RESOLVED: len(self.resolved),
            NOT_RECHECKED: len(self.not_rechecked),
        }

    def as_json(self) -> dict[str, Any]:
        def brief(f: Finding) -> dict[str, Any]:
            out = {
                "fingerprint": f.fingerprint,
                "title": f.title,
                "severity": f.severity,
                "category": f.category,
                "file": f.file,
                "start_line": f.start_line,
                "end_line": f.end_line,
            }
            if f.fingerprint in self.why:
                out["resolved_because"] = self.why[f.fingerprint]
            return out

        return {
            "baseline_audit_id": self.baseline_audit_id,
            "counts": self.counts(),
            "resolved": [brief(f) for f in self.resolved],
            "not_rechecked": [brief(f) for f in self.not_rechecked],
        }


def compare(
    current: Synthesis,
    previous: Synthesis,
    baseline_audit_id: int,
    resolutions: Mapping[str, Resolution],
    present: Collection[str],
) -> Comparison:
    """Match this audit's findings with the previous audit's by fingerprint. A previous finding this audit
    does not hold is resolved only for a reason: a reviewer shown it said fixed or wrong citing the code, or
    its lines or its file are gone (``resolutions``, by fingerprint; ``present`` the files of this audit's
    manifest); any other is not rechecked (a finding is never closed because nobody reported it again)."""
    before = {alias for f in previous.findings for alias in (f.aliases or [f.fingerprint])}
    now = {alias for f in current.findings for alias in (f.aliases or [f.fingerprint])}
    states = {
        f.fingerprint: PERSISTING if before.intersection(f.aliases or [f.fingerprint]) else NEW
        for f in current.findings
    }
    resolved, unchecked, why = [], [], {}
    for f in previous.findings:
        if now.intersection(f.aliases or [f.fingerprint]):
            continue
        record = next((resolutions[a] for a in (f.aliases or [f.fingerprint]) if a in resolutions), None)
        if record is not None:
            why[f.fingerprint] = _because(record)
            resolved.append(f)
        elif f.file not in present:
            why[f.fingerprint] = f"its file {f.file} is gone"
            resolved.append(f)
        else:
            unchecked.append(f)
    return Comparison(baseline_audit_id, states, resolved, unchecked, why)


def _because(record: Resolution) -> str:
    detail = record.detail
    if record.how == "lines_gone":
        return "its lines are gone: the evidence is no longer in the file"
    cited = detail.get("cited") or {}
    place = f"{cited.get('file')}:{cited.get('start_line')}-{cited.get('end_line')}" if cited else "no place"
    what = "fixed" if record.how == "fixed" else "wrong (never a defect)"
    reason = detail.get("reason") or "no reason"
    return f"{what}, by the re-review in {detail.get('packet_id')}: {reason} (citing {place})"
