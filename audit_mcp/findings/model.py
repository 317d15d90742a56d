"""What synthesis produces: merged findings, doubtful pairs, work blocks, and the whole of it.

Plain records shared by ``synthesis`` (which builds them), ``blocks`` (which groups findings into units of
change), ``assessment`` (which applies the second opinions) and the renderers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SEVERITY_RANK = {"critical": 0, "high": 1, "medium": 2, "low": 3, "info": 4}
CONFIDENCE_RANK = {"high": 0, "medium": 1, "low": 2}
# Within one severity, how much the second opinions stand behind a finding: evidence from running the code
# first, then a verifier's confirmation, then a reading nobody checked, then a failed reproduction.
STATUS_RANK = {
    "reproduced": 0,
    "confirmed": 1,
    "overstated": 1,
    "likely": 2,
    "disputed": 3,
    "unverified": 3,
    "not_reproduced": 4,
}
NEAR_LINES = 3  # one category this close, but not overlapping, may be one defect reported twice
MAX_DOUBTFUL = 200


@dataclass
class Finding:
    finding_id: str
    fingerprint: str
    title: str
    severity: str
    confidence: str
    category: str
    file: str
    start_line: int
    end_line: int
    evidence: str
    description: str
    recommendation: str
    symbol: str | None
    lenses: list[str]
    reporters: list[str]
    locations: list[tuple[int, int]]
    related_locations: list[dict[str, Any]]
    severity_reasons: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    category_id: str = ""  # the taxonomy id the category was filed under (core.taxonomy)
    # What the second opinions made of it (``assessment``): the status, the verdicts, runtime evidence.
    status: str = "unverified"
    original_severity: str | None = None  # the reported severity, when a verifier found it overstated
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    runtime_evidence: list[dict[str, Any]] = field(default_factory=list)
    merged_pairs: list[dict[str, Any]] = field(default_factory=list)  # verifiers who judged two reports one defect
    # Where an earlier audit's finding stands here without being reported again: carried with its unchanged
    # cell ({audit_id, git_head} of the audit that reported it), or kept open by a re-review that was shown it
    # and neither reported it again nor showed it fixed or wrong (why, in a sentence).
    carried_from: dict[str, Any] | None = None
    kept_open: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.finding_id,
            "fingerprint": self.fingerprint,
            "title": self.title,
            "severity": self.severity,
            "confidence": self.confidence,
            "category": self.category,
            "category_id": self.category_id,
            "file": self.file,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "evidence": self.evidence,
            "description": self.description,
            "recommendation": self.recommendation,
            "symbol": self.symbol,
            "lenses": self.lenses,
            "reported_by": self.reporters,
            "severity_reasons": self.severity_reasons,
            "fingerprint_aliases": self.aliases,
            "categories": self.categories,
            "evidence_ranges": [{"start_line": a, "end_line": b} for a, b in self.locations],
            "related_locations": self.related_locations,
            "status": self.status,
            "original_severity": self.original_severity,
            "verification": self.verdicts[-1] if len(self.verdicts) == 1 else None,
            "verifications": self.verdicts,
            "runtime_evidence": self.runtime_evidence,
            "merged_duplicates": self.merged_pairs,
            "carried_from": self.carried_from,
            "kept_open": self.kept_open,
        }


@dataclass(frozen=True)
class WorkBlock:
    block_id: str
    title: str
    severity: str
    effort: str
    finding_ids: list[str]
    files: list[str]
    order: int
    basis: str = "one finding"  # why its findings are one change: the same function, helper, or control

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.block_id,
            "order": self.order,
            "title": self.title,
            "severity": self.severity,
            "effort": self.effort,
            "findings": self.finding_ids,
            "files": self.files,
            "basis": self.basis,
        }


@dataclass
class Doubt:
    """Two findings the deduplicator kept apart without being sure; ``judged`` is a verifier's answer."""

    first: Finding
    second: Finding
    why: str
    judged: str | None = None  # "distinct" once a verifier said so (a pair judged the same is merged)

    @property
    def subject(self) -> str:
        a, b = sorted((self.first.fingerprint, self.second.fingerprint))
        return f"pair:{a}:{b}"


@dataclass(frozen=True)
class Synthesis:
    findings: list[Finding]
    blocks: list[WorkBlock]
    doubtful: list[Doubt] = field(default_factory=list)
    refuted: list[Finding] = field(default_factory=list)  # false positives, with the verifier's counter-evidence

    def by_severity(self) -> dict[str, int]:
        counts = dict.fromkeys(SEVERITY_RANK, 0)
        for f in self.findings:
            counts[f.severity] += 1
        return counts
