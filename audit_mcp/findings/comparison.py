"""Comparing an audit with the previous audit of the same repository, finding by finding.

Pure: two syntheses in, a state per finding out. Findings are matched by
fingerprint (any of the fingerprints a merged finding carries), so line
shifts and re-indentation do not turn an old finding into a new one.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from audit_mcp.findings.synthesis import Finding, Synthesis

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
            return {
                "fingerprint": f.fingerprint,
                "title": f.title,
                "severity": f.severity,
                "category": f.category,
                "file": f.file,
                "start_line": f.start_line,
                "end_line": f.end_line,
            }

        return {
            "baseline_audit_id": self.baseline_audit_id,
            "counts": self.counts(),
            "resolved": [brief(f) for f in self.resolved],
            "not_rechecked": [brief(f) for f in self.not_rechecked],
        }


def compare(
    current: Synthesis, previous: Synthesis, baseline_audit_id: int, reviewed: Collection[tuple[str, str]]
) -> Comparison:
    """``reviewed`` holds the (file, lens) pairs the current audit reviewed."""
    before = {alias for f in previous.findings for alias in (f.aliases or [f.fingerprint])}
    now = {alias for f in current.findings for alias in (f.aliases or [f.fingerprint])}
    states = {
        f.fingerprint: PERSISTING if before.intersection(f.aliases or [f.fingerprint]) else NEW
        for f in current.findings
    }
    resolved, unchecked = [], []
    for f in previous.findings:
        if now.intersection(f.aliases or [f.fingerprint]):
            continue
        if any((f.file, lens) in reviewed for lens in f.lenses):
            resolved.append(f)
        else:
            unchecked.append(f)
    return Comparison(baseline_audit_id, states, resolved, unchecked)
