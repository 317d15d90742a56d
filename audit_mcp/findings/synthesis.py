"""Synthesis: findings deduplicated across lenses and packets, fingerprinted, grouped into work blocks.

Pure: raw findings in, ``Synthesis`` out.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from audit_mcp.core.taxonomy import classify, describe

SEVERITY_RANK = {"critical": 0, "high": 1, "medium": 2, "low": 3, "info": 4}
CONFIDENCE_RANK = {"high": 0, "medium": 1, "low": 2}
_WS = re.compile(r"\s+")


def normalize_evidence(evidence: str) -> str:
    """Evidence as compared: whitespace runs collapsed, case folded, so re-indentation changes nothing."""
    return _WS.sub(" ", evidence).strip().lower()


def fingerprint(file: str, category: str, evidence: str) -> str:
    """An identity that survives line shifts: the file, the category (its taxonomy id, so rewording the
    category keeps it) and the normalised evidence.

    Line numbers are deliberately left out, so code inserted above a finding keeps its identity.
    """
    norm = normalize_evidence(evidence)
    return hashlib.sha256(f"{file}\0{category.strip().lower()}\0{norm}".encode()).hexdigest()[:20]


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

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.block_id,
            "order": self.order,
            "title": self.title,
            "severity": self.severity,
            "effort": self.effort,
            "findings": self.finding_ids,
            "files": self.files,
        }


@dataclass(frozen=True)
class Synthesis:
    findings: list[Finding]
    blocks: list[WorkBlock]

    def by_severity(self) -> dict[str, int]:
        counts = dict.fromkeys(SEVERITY_RANK, 0)
        for f in self.findings:
            counts[f.severity] += 1
        return counts


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _reason(raw: dict[str, Any]) -> str:
    return f"{raw['severity']} from the {raw['lens']} lens ({raw['packet_id']}): {raw['title']}"


def _merge_into(target: Finding, raw: dict[str, Any], fp: str) -> None:
    lens = raw["lens"]
    if lens not in target.lenses:
        target.lenses.append(lens)
    reporter = raw["packet_id"]
    if reporter not in target.reporters:
        target.reporters.append(reporter)
    span = (raw["start_line"], raw["end_line"])
    if span not in target.locations:
        target.locations.append(span)
    if fp not in target.aliases:
        target.aliases.append(fp)
    if raw["category"] not in target.categories:
        target.categories.append(raw["category"])
    reason = _reason(raw)
    if reason not in target.severity_reasons:
        target.severity_reasons.append(reason)
    if SEVERITY_RANK[raw["severity"]] < SEVERITY_RANK[target.severity]:
        target.severity = raw["severity"]
    if CONFIDENCE_RANK[raw["confidence"]] < CONFIDENCE_RANK[target.confidence]:
        target.confidence = raw["confidence"]
    for rel in raw.get("related_locations", []):
        if rel not in target.related_locations:
            target.related_locations.append(rel)


def category_id(raw: dict[str, Any]) -> str:
    """The taxonomy id of a raw finding: as filed at submission, else filed now from its text and lens."""
    filed = raw.get("category_id")
    return filed if isinstance(filed, str) and filed else classify(raw["category"], raw["lens"]).category_id


def _same_problem(f: Finding, raw: dict[str, Any], span: tuple[int, int]) -> bool:
    """Same file, and either the same quoted code from another lens or the same category at overlapping lines.

    Two lenses often name one defect differently (``CWE-89`` and ``sql-injection``) while quoting the
    same lines; one lens giving two categories for the same code means two problems, and two findings
    quoting different code are only merged when their categories agree.
    """
    if f.file != raw["file"]:
        return False
    if raw["lens"] not in f.lenses and normalize_evidence(f.evidence) == normalize_evidence(raw["evidence"]):
        return True
    return f.category_id == category_id(raw) and any(_overlaps(span, loc) for loc in f.locations)


def synthesize(raw_findings: Sequence[dict[str, Any]]) -> Synthesis:
    """Merge findings about the same place and problem; order by severity; group into work blocks."""
    merged: list[Finding] = []
    by_fp: dict[str, Finding] = {}
    ordered = sorted(
        raw_findings,
        key=lambda r: (SEVERITY_RANK[r["severity"]], r["file"], r["start_line"], r["lens"], r["packet_id"]),
    )
    for raw in ordered:
        cid = category_id(raw)
        fp = fingerprint(raw["file"], cid, raw["evidence"])
        span = (raw["start_line"], raw["end_line"])
        same = by_fp.get(fp) or next((f for f in merged if _same_problem(f, raw, span)), None)
        if same is not None:
            _merge_into(same, raw, fp)
            by_fp.setdefault(fp, same)
            continue
        finding = Finding(
            finding_id="",
            fingerprint=fp,
            title=raw["title"],
            severity=raw["severity"],
            confidence=raw["confidence"],
            category=raw["category"],
            file=raw["file"],
            start_line=raw["start_line"],
            end_line=raw["end_line"],
            evidence=raw["evidence"],
            description=raw["description"],
            recommendation=raw["recommendation"],
            symbol=raw.get("symbol"),
            lenses=[raw["lens"]],
            reporters=[raw["packet_id"]],
            locations=[span],
            related_locations=list(raw.get("related_locations", [])),
            severity_reasons=[_reason(raw)],
            aliases=[fp],
            categories=[raw["category"]],
            category_id=cid,
        )
        merged.append(finding)
        by_fp[fp] = finding
    merged.sort(key=lambda f: (SEVERITY_RANK[f.severity], CONFIDENCE_RANK[f.confidence], f.file, f.start_line))
    for i, f in enumerate(merged, 1):
        f.finding_id = f"F{i:03d}"
    return Synthesis(merged, _blocks(merged))


def _blocks(findings: Sequence[Finding]) -> list[WorkBlock]:
    groups: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for f in findings:
        groups[(f.category_id, posixpath.dirname(f.file) or ".")].append(f)
    blocks = []
    for (cid, directory), members in groups.items():
        entry = describe(cid)
        category = f"{entry.name} ({cid})" if entry.cwe else entry.name
        severity = min((m.severity for m in members), key=SEVERITY_RANK.__getitem__)
        files = sorted({m.file for m in members})
        effort = "small" if len(members) == 1 else "medium" if len(files) <= 3 else "large"
        title = members[0].title if len(members) == 1 else f"{category}: {len(members)} findings in {directory}/"
        blocks.append((severity, -len(members), cid, directory, title, effort, members, files))
    blocks.sort(key=lambda b: (SEVERITY_RANK[b[0]], b[1], b[2], b[3]))
    return [
        WorkBlock(f"W{i:02d}", title, severity, effort, [m.finding_id for m in members], files, i)
        for i, (severity, _n, _c, _d, title, effort, members, files) in enumerate(blocks, 1)
    ]
