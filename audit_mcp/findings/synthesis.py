"""Synthesis: findings deduplicated across lenses and packets, fingerprinted, grouped into work blocks.

Pure: raw findings in, ``Synthesis`` out. Pairs the deduplicator cannot tell apart (the same lines filed
under two categories, or one category a few lines apart) are kept apart and listed as ``doubtful``; a
verifier's judgement that a pair is one defect comes back as ``same`` and merges it.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Collection, Sequence
from typing import Any

from audit_mcp.core.taxonomy import classify
from audit_mcp.findings.blocks import work_blocks
from audit_mcp.findings.model import (
    CONFIDENCE_RANK,
    MAX_DOUBTFUL,
    NEAR_LINES,
    SEVERITY_RANK,
    Doubt,
    Finding,
    Synthesis,
    WorkBlock,
)

__all__ = [
    "CONFIDENCE_RANK",
    "SEVERITY_RANK",
    "Doubt",
    "Finding",
    "Synthesis",
    "WorkBlock",
    "category_id",
    "fingerprint",
    "normalize_evidence",
    "synthesize",
]

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
    # Reported in this audit by any of its raws: it is this audit's finding, not one carried or kept open.
    if raw.get("carried_from") is None:
        target.carried_from = None
    if raw.get("kept_open") is None:
        target.kept_open = None


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


def synthesize(raw_findings: Sequence[dict[str, Any]], same: Collection[tuple[str, str]] = ()) -> Synthesis:
    """Merge findings about the same place and problem; order by severity; group into work blocks.

    ``same`` holds fingerprint pairs a verifier judged to be one defect: they are merged too.
    """
    merged: list[Finding] = []
    by_fp: dict[str, Finding] = {}
    by_file: dict[str, list[Finding]] = {}  # a finding is only ever the same problem as one in its own file
    ordered = sorted(
        raw_findings,
        key=lambda r: (SEVERITY_RANK[r["severity"]], r["file"], r["start_line"], r["lens"], r["packet_id"]),
    )
    for raw in ordered:
        cid = category_id(raw)
        fp = fingerprint(raw["file"], cid, raw["evidence"])
        span = (raw["start_line"], raw["end_line"])
        same_place = by_fp.get(fp) or next(
            (f for f in by_file.get(raw["file"], ()) if _same_problem(f, raw, span)), None
        )
        if same_place is not None:
            _merge_into(same_place, raw, fp)
            by_fp.setdefault(fp, same_place)
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
            carried_from=raw.get("carried_from"),
            kept_open=raw.get("kept_open"),
        )
        merged.append(finding)
        by_file.setdefault(finding.file, []).append(finding)
        by_fp[fp] = finding
    merged = _merge_judged(merged, same)
    merged.sort(key=lambda f: (SEVERITY_RANK[f.severity], CONFIDENCE_RANK[f.confidence], f.file, f.start_line))
    for i, f in enumerate(merged, 1):
        f.finding_id = f"F{i:03d}"
    return Synthesis(merged, work_blocks(merged), _doubtful(merged))


def _merge_judged(findings: list[Finding], same: Collection[tuple[str, str]]) -> list[Finding]:
    """Fold each pair a verifier judged to be one defect into one finding (the more severe keeps its place)."""
    for a, b in same:
        first = next((f for f in findings if a in f.aliases), None)
        second = next((f for f in findings if b in f.aliases), None)
        if first is None or second is None or first is second:
            continue
        keep, gone = sorted((first, second), key=lambda f: (SEVERITY_RANK[f.severity], f.file, f.start_line))
        for lens in gone.lenses:
            if lens not in keep.lenses:
                keep.lenses.append(lens)
        for attr in ("reporters", "locations", "aliases", "categories", "severity_reasons", "related_locations"):
            target = getattr(keep, attr)
            target.extend(x for x in getattr(gone, attr) if x not in target)
        if CONFIDENCE_RANK[gone.confidence] < CONFIDENCE_RANK[keep.confidence]:
            keep.confidence = gone.confidence
        findings = [f for f in findings if f is not gone]
    return findings


def _gap(a: tuple[int, int], b: tuple[int, int]) -> int:
    """Lines between two ranges (0 when they touch or overlap)."""
    return max(0, max(a[0], b[0]) - min(a[1], b[1]) - 1)


def _doubtful(findings: Sequence[Finding]) -> list[Doubt]:
    """Pairs in one file that may be one defect: the same lines under two categories, or one category a few
    lines apart (the deduplicator merges neither)."""
    by_file: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_file[f.file].append(f)
    doubts: list[Doubt] = []
    for members in by_file.values():
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                overlap = any(_overlaps(x, y) for x in a.locations for y in b.locations)
                gap = min(_gap(x, y) for x in a.locations for y in b.locations)
                if overlap and a.category_id != b.category_id:
                    why = f"both are at overlapping lines of {a.file} but filed as {a.category_id} and {b.category_id}"
                elif not overlap and a.category_id == b.category_id and gap <= NEAR_LINES:
                    why = f"both are {a.category_id} in {a.file}, {gap} line(s) apart"
                else:
                    continue
                doubts.append(Doubt(a, b, why))
                if len(doubts) >= MAX_DOUBTFUL:
                    return doubts
    return doubts
