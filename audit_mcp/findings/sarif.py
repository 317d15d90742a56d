"""The report as SARIF 2.1.0, for code-scanning tools (GitHub code scanning among them).

Pure: a ``ReportInput`` in, one SARIF log out. One rule per finding category;
security rules carry CWE tags and a ``security-severity``; locations are
repo-relative under ``%SRCROOT%``; the project's own fingerprint goes under
``partialFingerprints["auditMcp/v1"]`` (GitHub computes its own line hash);
every coverage gap becomes a tool execution notification, and the invocation
succeeds only when the audit is complete.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from audit_mcp.core.version import __version__
from audit_mcp.findings.comparison import SARIF_BASELINE
from audit_mcp.findings.report import ReportInput, confirmed_leads
from audit_mcp.findings.synthesis import Finding

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
FINGERPRINT_KEY = "auditMcp/v1"
SRCROOT = "%SRCROOT%"
MAX_TAGS = 20
MAX_MESSAGE_CHARS = 4_000

LEVELS = {"critical": "error", "high": "error", "medium": "warning", "low": "note", "info": "note"}
SECURITY_SEVERITY = {"critical": "9.5", "high": "8.0", "medium": "5.5", "low": "3.0", "info": "1.0"}
PRECISION = {"high": "high", "medium": "medium", "low": "low"}
_CWE = re.compile(r"\bCWE[-_ ]?(\d{1,5})\b", re.I)
_SLUG = re.compile(r"[^a-z0-9]+")

# Names of the weaknesses audits meet most, for rule descriptions; others fall back to the finding's title.
CWE_NAMES = {
    "22": "Path traversal",
    "78": "OS command injection",
    "79": "Cross-site scripting",
    "89": "SQL injection",
    "94": "Code injection",
    "190": "Integer overflow or wraparound",
    "193": "Off-by-one error",
    "200": "Exposure of sensitive information",
    "287": "Improper authentication",
    "295": "Improper certificate validation",
    "327": "Broken or risky cryptographic algorithm",
    "330": "Insufficiently random values",
    "352": "Cross-site request forgery",
    "362": "Race condition",
    "390": "Error detected without action",
    "400": "Uncontrolled resource consumption",
    "502": "Deserialization of untrusted data",
    "611": "XML external entity reference",
    "703": "Improper check or handling of exceptional conditions",
    "798": "Hard-coded credentials",
    "862": "Missing authorization",
    "918": "Server-side request forgery",
}


def cwe_ids(text: str) -> list[str]:
    """The CWE numbers named in a category such as ``CWE-89`` or ``sql injection (cwe_89)``."""
    return list(dict.fromkeys(m.group(1).lstrip("0") or "0" for m in _CWE.finditer(text)))


def rule_id(category: str) -> str:
    """A stable rule id for a finding category: ``CWE-89`` → ``cwe-89``, ``N+1 query`` → ``n-1-query``."""
    return _SLUG.sub("-", category.strip().lower()).strip("-") or "uncategorised"


def _is_security(findings: Sequence[Finding]) -> bool:
    return any("security" in f.lenses or cwe_ids(" ".join(f.categories or [f.category])) for f in findings)


def _rule(rid: str, findings: Sequence[Finding]) -> dict[str, Any]:
    first = findings[0]
    cwes = list(dict.fromkeys(c for f in findings for c in cwe_ids(" ".join(f.categories or [f.category]))))
    lenses = sorted({lens for f in findings for lens in f.lenses})
    name = next((CWE_NAMES[c] for c in cwes if c in CWE_NAMES), None) or first.title
    security = _is_security(findings)
    tags = (["security"] if security else []) + [f"external/cwe/cwe-{c}" for c in cwes] + lenses
    worst = min(findings, key=lambda f: list(LEVELS).index(f.severity)).severity
    best_confidence = min(findings, key=lambda f: list(PRECISION).index(f.confidence)).confidence
    properties: dict[str, Any] = {"tags": list(dict.fromkeys(tags))[:MAX_TAGS], "precision": PRECISION[best_confidence]}
    if security:
        properties["security-severity"] = SECURITY_SEVERITY[worst]
    help_text = (
        f"{name}. Reported under the {', '.join(lenses)} lens(es) of the audit with category "
        f"'{first.category}'. How to fix the first occurrence: {first.recommendation}"
    )
    return {
        "id": rid,
        "name": "".join(part.capitalize() for part in rid.split("-")) or "Finding",
        "shortDescription": {"text": name[:200]},
        "fullDescription": {"text": f"{name}: {first.description}"[:MAX_MESSAGE_CHARS]},
        "help": {
            "text": help_text[:MAX_MESSAGE_CHARS],
            "markdown": f"**{name}**\n\n{first.recommendation}\n\nCategory: `{first.category}`; "
            f"lenses: {', '.join(lenses)}.",
        },
        "defaultConfiguration": {"level": LEVELS[worst]},
        "properties": properties,
    }


def _location(path: str, start: int, end: int, snippet: str | None = None) -> dict[str, Any]:
    region: dict[str, Any] = {"startLine": max(1, start), "endLine": max(start, end)}
    if snippet:
        region["snippet"] = {"text": snippet}
    return {
        "physicalLocation": {
            "artifactLocation": {"uri": str(PurePosixPath(path)), "uriBaseId": SRCROOT},
            "region": region,
        }
    }


def _result(f: Finding, rid: str, index: int, baseline: str | None, leads: list[str]) -> dict[str, Any]:
    related = []
    for n, (a, b) in enumerate(f.locations[1:], 1):
        related.append(_location(f.file, a, b) | {"id": n, "message": {"text": "also reported here"}})
    for rel in f.related_locations:
        related.append(
            _location(rel["file"], rel["start_line"], rel["end_line"])
            | {"id": len(related) + 1, "message": {"text": rel["role"]}}
        )
    result: dict[str, Any] = {
        "ruleId": rid,
        "ruleIndex": index,
        "level": LEVELS[f.severity],
        "message": {"text": f"{f.title}. {f.description}"[:MAX_MESSAGE_CHARS]},
        "locations": [_location(f.file, f.start_line, f.end_line, f.evidence)],
        "partialFingerprints": {FINGERPRINT_KEY: f.fingerprint},
        "properties": {
            "findingId": f.finding_id,
            "severity": f.severity,
            "confidence": f.confidence,
            "category": f.category,
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
    return result


def _notifications(r: ReportInput) -> list[dict[str, Any]]:
    notes = []
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
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": fr.path, "uriBaseId": SRCROOT}}}],
                "descriptor": {"id": "coverage/skipped-file"},
            }
        )
    return notes


def render_sarif(r: ReportInput) -> dict[str, Any]:
    """The audit as one SARIF 2.1.0 log with a single run."""
    findings = r.synthesis.findings
    by_rule: dict[str, list[Finding]] = {}
    for f in findings:
        by_rule.setdefault(rule_id(f.category), []).append(f)
    rule_ids = sorted(by_rule)
    rules = [_rule(rid, by_rule[rid]) for rid in rule_ids]
    index = {rid: i for i, rid in enumerate(rule_ids)}
    comparison = r.comparison
    confirmed = confirmed_leads(r.leads)
    results = [
        _result(
            f,
            rule_id(f.category),
            index[rule_id(f.category)],
            SARIF_BASELINE[comparison.states[f.fingerprint]] if comparison else None,
            confirmed.get(f.finding_id, []),
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
        "columnKind": "unicodeCodePoints",
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
        },
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
