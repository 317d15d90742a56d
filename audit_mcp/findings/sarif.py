"""The report as SARIF 2.1.0, for code-scanning tools (GitHub code scanning among them).

Pure: a ``ReportInput`` in, one SARIF log out. One rule per taxonomy id (``core.taxonomy``): a finding's
category is filed under a CWE id or a fixed class, so its rule id and fingerprints survive a reworded
category in the next audit, and the rule's text comes from the taxonomy, never from one reviewer's words
(which stay in the result's ``properties``). Security rules carry CWE tags and a ``security-severity``;
descriptions keep within GitHub's limits. Locations are repo-relative under ``%SRCROOT%``, with columns
where the evidence pins them; ``partialFingerprints`` holds the project's own fingerprint and GitHub's
``primaryLocationLineHash``, computed as the upload action does (the REST API computes none). Related
locations are linked from the message (``[role](id)``), as GitHub requires to show them. Every coverage
gap becomes a tool execution notification, and the invocation succeeds only when the audit is complete.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from audit_mcp.core.escape import uri_path
from audit_mcp.core.taxonomy import describe, slug
from audit_mcp.core.version import __version__
from audit_mcp.findings.assessment import REFUTED, verification_counts
from audit_mcp.findings.comparison import SARIF_BASELINE
from audit_mcp.findings.line_hash import line_hashes
from audit_mcp.findings.regions import evidence_columns, file_lines
from audit_mcp.findings.report import ReportInput, confirmed_leads, honesty_notes
from audit_mcp.findings.synthesis import Finding

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
FINGERPRINT_KEY = "auditMcp/v1"
LINE_HASH_KEY = "primaryLocationLineHash"
SRCROOT = "%SRCROOT%"
COLUMN_KIND = "utf16CodeUnits"
# GitHub's limits: rule names 255 characters, descriptions 1,024, 20 tags, 25,000 results and rules per run,
# 1,000 locations per result. Messages have none documented; this one keeps them readable.
MAX_NAME_CHARS = 255
MAX_DESCRIPTION_CHARS = 1_024
MAX_TAGS = 20
MAX_RESULTS = 25_000
MAX_RELATED = 1_000
MAX_MESSAGE_CHARS = 4_000

LEVELS = {"critical": "error", "high": "error", "medium": "warning", "low": "note", "info": "note"}
SECURITY_SEVERITY = {"critical": "9.5", "high": "8.0", "medium": "5.5", "low": "3.0", "info": "1.0"}
PRECISION = {"high": "high", "medium": "medium", "low": "low"}
_LINK_LIKE = re.compile(r"\[([^\[\]]*)\](?=\()")


def rule_id(category_id: str) -> str:
    """The rule id of a taxonomy id: ``CWE-89`` → ``cwe-89``, ``n-plus-one`` stays."""
    return category_id.lower()


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, at a word where one is near, marked with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"


def _plain(text: str) -> str:
    """Reviewer text made safe for a SARIF message: brackets that would read as an embedded link are escaped."""
    return _LINK_LIKE.sub(lambda m: "\\[" + m.group(1) + "\\]", text)


def _rule(category_id: str, findings: Sequence[Finding]) -> dict[str, Any]:
    entry = describe(category_id)
    lenses = sorted({lens for f in findings for lens in f.lenses})
    # The rule's level and security-severity come from the findings that stand (refuted ones only if none do).
    findings = [f for f in findings if f.status != REFUTED] or list(findings)
    security = "security" in lenses or entry.cwe is not None
    tags = (["security"] if security else []) + ([f"external/cwe/cwe-{entry.cwe}"] if entry.cwe else []) + lenses
    worst = min(findings, key=lambda f: list(LEVELS).index(f.severity)).severity
    best_confidence = min(findings, key=lambda f: list(PRECISION).index(f.confidence)).confidence
    properties: dict[str, Any] = {"tags": list(dict.fromkeys(tags))[:MAX_TAGS], "precision": PRECISION[best_confidence]}
    if security:
        properties["security-severity"] = SECURITY_SEVERITY[worst]
    title = f"{entry.name} ({category_id})" if entry.cwe else entry.name
    full = f"{title}: {entry.description}"
    how = "Each result names the place, quotes the evidence, and says how to fix that occurrence."
    rule: dict[str, Any] = {
        "id": rule_id(category_id),
        "name": clip("".join(part.capitalize() for part in slug(entry.name).split("-")) or "Finding", MAX_NAME_CHARS),
        "shortDescription": {"text": clip(title, MAX_DESCRIPTION_CHARS)},
        "fullDescription": {"text": clip(full, MAX_DESCRIPTION_CHARS)},
        "help": {
            "text": f"{full} {how}" + (f" See {entry.help_uri}" if entry.help_uri else ""),
            "markdown": f"**{title}**\n\n{entry.description}\n\n{how}"
            + (f"\n\n[{category_id} on MITRE's CWE list]({entry.help_uri})" if entry.help_uri else ""),
        },
        "defaultConfiguration": {"level": LEVELS[worst]},
        "properties": properties,
    }
    if entry.help_uri:
        rule["helpUri"] = entry.help_uri
    return rule


def _location(
    path: str, start: int, end: int, snippet: str | None = None, columns: tuple[int, int] | None = None
) -> dict[str, Any]:
    region: dict[str, Any] = {"startLine": max(1, start), "endLine": max(start, end)}
    if columns is not None:
        region["startColumn"], region["endColumn"] = columns
    if snippet:
        region["snippet"] = {"text": snippet}
    return {
        "physicalLocation": {
            "artifactLocation": {"uri": uri_path(str(PurePosixPath(path))), "uriBaseId": SRCROOT},
            "region": region,
        }
    }


class _Sources:
    """The audited files' current bytes, split into lines and hashed once each, on demand."""

    def __init__(self, sources: Mapping[str, bytes]) -> None:
        self._sources = sources
        self._lines: dict[str, list[str]] = {}
        self._hashes: dict[str, list[str]] = {}

    def lines(self, path: str) -> list[str] | None:
        if path not in self._sources:
            return None
        if path not in self._lines:
            self._lines[path] = file_lines(self._sources[path])
        return self._lines[path]

    def line_hash(self, path: str, line: int) -> str | None:
        if path not in self._sources:
            return None
        if path not in self._hashes:
            self._hashes[path] = line_hashes(self._sources[path])
        hashes = self._hashes[path]
        return hashes[line - 1] if 1 <= line <= len(hashes) else None


def _result(
    f: Finding, rid: str, index: int, baseline: str | None, leads: list[str], sources: _Sources
) -> dict[str, Any]:
    places: list[tuple[str, int, int, str]] = [(f.file, a, b, "also reported here") for a, b in f.locations[1:]]
    places += [(rel["file"], rel["start_line"], rel["end_line"], rel["role"]) for rel in f.related_locations]
    related, links = [], []
    for n, (path, a, b, role) in enumerate(places[:MAX_RELATED], 1):
        text = role.replace("[", "(").replace("]", ")").strip() or "related"  # link text holds no brackets
        related.append(_location(path, a, b) | {"id": n, "message": {"text": text}})
        links.append(f"[{text}]({n})")
    tail = f" Related: {', '.join(links)}." if links else ""
    head = clip(_plain(f"{f.title}. {f.description}"), max(200, MAX_MESSAGE_CHARS - len(tail)))
    lines = sources.lines(f.file)
    columns = evidence_columns(lines, f.start_line, f.end_line, f.evidence) if lines is not None else None
    fingerprints = {FINGERPRINT_KEY: f.fingerprint}
    if (line_hash := sources.line_hash(f.file, f.start_line)) is not None:
        fingerprints[LINE_HASH_KEY] = line_hash
    result: dict[str, Any] = {
        "ruleId": rid,
        "ruleIndex": index,
        "level": LEVELS[f.severity],
        "message": {"text": head + tail},
        "locations": [_location(f.file, f.start_line, f.end_line, f.evidence, columns)],
        "partialFingerprints": fingerprints,
        "properties": {
            "findingId": f.finding_id,
            "severity": f.severity,
            "confidence": f.confidence,
            "category": f.category,
            "categories": f.categories,
            "lenses": f.lenses,
            "reportedBy": f.reporters,
            "severityReasons": f.severity_reasons,
            "recommendation": f.recommendation,
        },
    }
    if f.symbol:
        result["locations"][0]["logicalLocations"] = [{"name": f.symbol}]
    if related:
        result["relatedLocations"] = related
    if baseline is not None:
        result["baselineState"] = baseline
    if leads:
        result["properties"]["confirmsLeads"] = leads
    if f.carried_from:
        result["properties"]["carriedFrom"] = {
            "auditId": f.carried_from.get("audit_id"),
            "gitHead": f.carried_from.get("git_head"),
        }
    if f.kept_open:
        result["properties"]["keptOpen"] = f.kept_open
    result["properties"] |= _opinions(f)
    if f.status == REFUTED:
        why = "; ".join(v.get("rationale", "") for v in f.verdicts) or "refuted by a verifier"
        # Spec-correct, but GitHub code scanning ignores suppressions: see docs/reports.md ("SARIF").
        result["suppressions"] = [
            {"kind": "external", "status": "accepted", "justification": clip(f"Refuted by a verifier: {why}", 1_000)}
        ]
    return result


def _opinions(f: Finding) -> dict[str, Any]:
    """What the second opinions said, for a result's properties."""
    out: dict[str, Any] = {"status": f.status, "refuted": f.status == REFUTED}
    if f.original_severity:
        out["originalSeverity"] = f.original_severity
    if f.verdicts:
        out["verification"] = [
            {
                "verdict": v["verdict"],
                "fairSeverity": v.get("fair_severity"),
                "rationale": v.get("rationale", ""),
                "taskId": v["task_id"],
                "cited": [f"{c['file']}:{c['start_line']}-{c['end_line']}" for c in v.get("cited", [])],
            }
            for v in f.verdicts
        ]
    if f.runtime_evidence:
        out["runtimeEvidence"] = [
            {"evidenceId": e["evidence_id"], "verdict": e["verdict"], "kind": e.get("kind"), "addedAt": e["added_at"]}
            for e in f.runtime_evidence
        ]
    return out


def _notifications(r: ReportInput) -> list[dict[str, Any]]:
    # First what the reader must know before trusting any result: scripted reviews, a provisional report.
    notes: list[dict[str, Any]] = [
        {
            "level": "warning",
            "message": {"text": note.removeprefix("> ").replace("**", "")},
            "descriptor": {"id": "audit/honesty"},
        }
        for note in honesty_notes(r)
    ]
    for c in r.gap_cells:
        notes.append(
            {
                "level": "error" if c.state == "failed" else "warning",
                "message": {
                    "text": f"not reviewed ({c.state}) under the {c.lens} lens: {c.path} lines "
                    f"{c.start_line}-{c.end_line}{f': {c.reason}' if c.reason else ''}"
                },
                "locations": [_location(c.path, c.start_line, c.end_line)],
                "descriptor": {"id": f"coverage/{c.state}"},
                "properties": {"taskId": c.task_id, "lens": c.lens},
            }
        )
    for fr in r.skipped_files:
        notes.append(
            {
                "level": "note",
                "message": {"text": f"skipped file {fr.path}: {fr.skip_reason}"},
                "locations": [
                    {"physicalLocation": {"artifactLocation": {"uri": uri_path(fr.path), "uriBaseId": SRCROOT}}}
                ],
                "descriptor": {"id": "coverage/skipped-file"},
            }
        )
    return notes


def render_sarif(r: ReportInput, *, drop_refuted: bool = False) -> dict[str, Any]:
    """The audit as one SARIF 2.1.0 log with a single run; ``drop_refuted`` leaves refuted findings out (for
    uploads to tools that ignore ``suppressions``, GitHub code scanning among them)."""
    # Most severe first, then the refuted ones (kept, suppressed); code scanning refuses more than MAX_RESULTS.
    everything = [*r.synthesis.findings, *([] if drop_refuted else r.synthesis.refuted)]
    findings = everything[:MAX_RESULTS]
    by_rule: dict[str, list[Finding]] = {}
    for f in findings:
        by_rule.setdefault(f.category_id, []).append(f)
    category_ids = sorted(by_rule, key=rule_id)
    rules = [_rule(cid, by_rule[cid]) for cid in category_ids]
    index = {cid: i for i, cid in enumerate(category_ids)}
    comparison = r.comparison
    confirmed = confirmed_leads(r.leads)
    sources = _Sources(r.sources)
    results = [
        _result(
            f,
            rule_id(f.category_id),
            index[f.category_id],
            SARIF_BASELINE[comparison.states[f.fingerprint]] if comparison else None,
            confirmed.get(f.finding_id, []),
            sources,
        )
        for f in findings
    ]
    run: dict[str, Any] = {
        "tool": {
            "driver": {"name": "audit-mcp", "semanticVersion": __version__, "version": __version__, "rules": rules}
        },
        "automationDetails": {"id": f"audit-mcp/audit-{r.audit_id}"},
        "originalUriBaseIds": {
            SRCROOT: {"uri": _root_uri(r.root), "description": {"text": "The root of the audited repository."}}
        },
        "columnKind": COLUMN_KIND,
        "invocations": [
            {
                "executionSuccessful": r.completeness == "complete",
                "startTimeUtc": r.created_at,
                "endTimeUtc": r.generated_at,
                "toolExecutionNotifications": _notifications(r),
                "properties": {"completeness": r.completeness, "coverage": dict(r.totals), "runs": r.runs},
            }
        ],
        "results": results,
        "properties": {
            "auditId": r.audit_id,
            "gitHead": r.git_head,
            "gitDirty": r.git_dirty,
            "manifestDigest": r.manifest_digest,
            "provisional": r.provisional,
            "completenessReason": r.completeness_reason,
            "reviews": {"scripted": bool(r.scripted_reviewers), "by": list(r.scripted_reviewers)},
        },
    }
    if len(everything) > MAX_RESULTS:
        run["properties"]["omittedResults"] = len(everything) - MAX_RESULTS
    run["properties"]["verification"] = {
        "byStatus": verification_counts(r.synthesis),
        "suppressedResults": sum(1 for f in findings if f.status == REFUTED),
        "note": "Refuted findings are results with suppressions (kind external) and properties.refuted = true. "
        "GitHub code scanning ignores suppressions and shows them as open alerts: upload the output of "
        "`audit-mcp report --format sarif --drop-refuted` instead.",
    }
    if r.opinions.threat_model is not None:
        run["properties"]["threatModel"] = {
            "summary": r.opinions.threat_model.get("summary"),
            "origin": r.opinions.threat_model_origin,
        }
    if comparison is not None:
        # Resolved findings stay out of results[]: code scanning does not document result.kind, so an
        # "absent" result could come back as an open alert. Its closing alert is the missing result itself.
        run["properties"]["baseline"] = comparison.as_json()
    if r.git_head:
        run["versionControlProvenance"] = [{"repositoryUri": _root_uri(r.root), "revisionId": r.git_head}]
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def _root_uri(root: str) -> str:
    uri = PurePosixPath(root).as_uri() if root.startswith("/") else "file:///" + root.replace("\\", "/")
    return uri if uri.endswith("/") else uri + "/"
