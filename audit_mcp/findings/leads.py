"""Analyzer leads: alerts of static analyzers (any SARIF 2.1.0 producer, bandit's and semgrep's JSON) imported
as places to check.

A lead is not a finding. The packet that reviews its file carries it, and the
reviewer confirms or refutes it (``leads`` in a task result); the report shows
the verdicts. Parsing is pure apart from reading the given files; paths are
mapped to the repository's manifest, and alerts outside it are dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit_mcp.core.errors import ConfigError
from audit_mcp.findings.lead_formats import clean, cwe_numbers, detect, parse_plain, refusal, relpath
from audit_mcp.store.records import Lead, Verdict

MAX_LEADS = 2_000
MAX_LEADS_PER_PACKET = 40
MAX_SARIF_BYTES = 50_000_000
LEVEL_RANK = {"error": 0, "warning": 1, "note": 2, "none": 3}


@dataclass(frozen=True)
class Import:
    leads: list[Lead]
    dropped: dict[str, int]
    """Alerts not imported, by reason (outside the repository, not in scope, duplicate, over the limit)."""


def _rules(run: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    rules = (run.get("tool") or {}).get("driver", {}).get("rules") or []
    return {r["id"]: r for r in rules if isinstance(r, Mapping) and isinstance(r.get("id"), str)}


def _cwes(rule: Mapping[str, Any], result: Mapping[str, Any]) -> tuple[str, ...]:
    return cwe_numbers(
        [*((rule.get("properties") or {}).get("tags") or []), *((result.get("properties") or {}).get("tags") or [])]
    )


def parse_sarif(
    doc: Any, source: str, root: Path, in_scope: Callable[[str], bool]
) -> tuple[list[Lead], dict[str, int]]:
    """Leads (without ids yet) from one SARIF log, and counts of the alerts dropped, by reason."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("runs"), list):
        raise ConfigError(
            f"{source} is not a SARIF log (no 'runs' array); give the file the analyzer wrote with "
            "its SARIF output option"
        )
    leads: list[Lead] = []
    dropped: dict[str, int] = {}
    for run in doc["runs"]:
        if not isinstance(run, Mapping):
            continue
        tool = str(((run.get("tool") or {}).get("driver") or {}).get("name") or "analyzer")
        rules = _rules(run)
        bases = {k: v.get("uri") for k, v in (run.get("originalUriBaseIds") or {}).items() if isinstance(v, Mapping)}
        for result in run.get("results") or []:
            if not isinstance(result, Mapping) or result.get("kind", "fail") not in ("fail", "open", "review"):
                continue
            try:
                physical = result["locations"][0]["physicalLocation"]
                artifact = physical["artifactLocation"]
                uri = artifact["uri"]
            except (KeyError, IndexError, TypeError):
                dropped["no location"] = dropped.get("no location", 0) + 1
                continue
            path = relpath(str(uri), bases.get(artifact.get("uriBaseId")), root)
            if path is None:
                dropped["outside the repository"] = dropped.get("outside the repository", 0) + 1
                continue
            if not in_scope(path):
                dropped["file not in scope"] = dropped.get("file not in scope", 0) + 1
                continue
            region = physical.get("region") or {}
            first, last = region.get("startLine"), region.get("endLine")
            start = first if isinstance(first, int) else 1
            end = last if isinstance(last, int) else start
            rule_id = str(result.get("ruleId") or (result.get("rule") or {}).get("id") or "unknown")
            rule = rules.get(rule_id, {})
            level = result.get("level") or (rule.get("defaultConfiguration") or {}).get("level") or "warning"
            text = (result.get("message") or {}).get("text") or (rule.get("shortDescription") or {}).get("text")
            leads.append(
                Lead(
                    lead_id="",
                    tool=clean(tool, 60),
                    rule_id=clean(rule_id, 100),
                    path=path,
                    start_line=max(1, start),
                    end_line=max(start, end, 1),
                    level=level if level in LEVEL_RANK else "warning",
                    message=clean(str(text or rule_id)),
                    cwes=_cwes(rule, result),
                    help_uri=rule.get("helpUri") if isinstance(rule.get("helpUri"), str) else None,
                )
            )
    return leads, dropped


def import_leads(sources: Iterable[tuple[str, bytes]], root: Path, in_scope: Callable[[str], bool]) -> Import:
    """Leads from every analyzer document (its name and bytes; SARIF, bandit or semgrep JSON, told apart by
    their content), deduplicated, numbered L001… in file and line order."""
    found: list[Lead] = []
    dropped: dict[str, int] = {}
    for source, data in sources:
        if len(data) > MAX_SARIF_BYTES:
            raise ConfigError(f"analyzer results {source} are over {MAX_SARIF_BYTES} bytes; filter them first")
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, too deep, or a number too long
            raise ConfigError(f"analyzer results {source} are not valid JSON: {str(exc)[:200]}") from exc
        kind = detect(doc)
        if kind is None:
            raise ConfigError(refusal(doc, source))
        if kind == "sarif":
            leads, skipped = parse_sarif(doc, source, root, in_scope)
        else:
            leads, skipped = parse_plain(doc, kind, root, in_scope)
        found += leads
        for reason, n in skipped.items():
            dropped[reason] = dropped.get(reason, 0) + n
    unique: dict[tuple[str, str, str, int, int], Lead] = {}
    for lead in found:
        key = (lead.tool, lead.rule_id, lead.path, lead.start_line, lead.end_line)
        if key in unique:
            dropped["duplicate"] = dropped.get("duplicate", 0) + 1
        unique.setdefault(key, lead)
    ordered = sorted(unique.values(), key=lambda x: (LEVEL_RANK[x.level], x.path, x.start_line, x.rule_id))
    if len(ordered) > MAX_LEADS:
        dropped["over the limit"] = len(ordered) - MAX_LEADS
        ordered = ordered[:MAX_LEADS]
    ordered.sort(key=lambda x: (x.path, x.start_line, x.tool, x.rule_id))
    numbered = [
        Lead(f"L{i:03d}", x.tool, x.rule_id, x.path, x.start_line, x.end_line, x.level, x.message, x.cwes, x.help_uri)
        for i, x in enumerate(ordered, 1)
    ]
    return Import(numbered, dropped)


def leads_in(leads: Sequence[Lead], ranges: Iterable[tuple[str, int, int]]) -> list[Lead]:
    """The leads that fall in any of the (path, start, end) ranges, most severe first, capped per packet."""
    spans = list(ranges)
    inside = [x for x in leads if any(x.path == p and a <= x.start_line <= b for p, a, b in spans)]
    inside.sort(key=lambda x: (LEVEL_RANK[x.level], x.path, x.start_line))
    return sorted(inside[:MAX_LEADS_PER_PACKET], key=lambda x: (x.path, x.start_line))


def lead_report(
    leads: Sequence[Lead], verdicts: Sequence[Verdict], findings: Sequence[tuple[str, str, int, int]]
) -> list[dict[str, Any]]:
    """Each lead with its verdicts, its status, and the ids of the findings at its place.

    ``findings`` are (finding_id, file, start_line, end_line).
    """
    by_lead: dict[str, list[Verdict]] = {}
    for v in verdicts:
        by_lead.setdefault(v.lead_id, []).append(v)
    out = []
    for x in leads:
        mine = by_lead.get(x.lead_id, [])
        near = [fid for fid, path, a, b in findings if path == x.path and a <= x.end_line and x.start_line <= b]
        out.append(
            x.as_json()
            | {
                "status": lead_status(mine),
                "verdicts": [
                    {"verdict": v.verdict, "reason": v.reason, "packet_id": v.packet_id, "task_id": v.task_id}
                    for v in mine
                ],
                "findings": near,
            }
        )
    return out


def lead_status(verdicts: Sequence[Verdict]) -> str:
    """One word for the report: confirmed, refuted, disputed (reviewers disagree) or unchecked."""
    kinds = {v.verdict for v in verdicts}
    if not kinds:
        return "unchecked"
    return kinds.pop() if len(kinds) == 1 else "disputed"
