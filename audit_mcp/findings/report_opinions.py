"""The second opinions in the report: the threat model, each finding's verdicts and runtime evidence, the
refuted findings with their counter-evidence, and the doubtful duplicates.

Every text here came from a reviewer, a verifier or a person attaching evidence: it is escaped for Markdown
(``core.escape``), and runtime output is fenced so nothing in it can close the block.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from audit_mcp.core.escape import md_block, md_code, md_fence, md_inline
from audit_mcp.findings.assessment import verification_counts
from audit_mcp.findings.model import Finding, Synthesis

MAX_OUTPUT_SHOWN = 1_500  # characters of runtime output in the Markdown report (the JSON keeps what was stored)
_EXPOSURE = ("network", "local", "cli", "library", "build", "test", "other")

_Line = Callable[[Mapping[str, Any]], str]


@dataclass(frozen=True)
class Opinions:
    """What the report needs of the context and verification passes besides the assessed findings."""

    threat_model: Mapping[str, Any] | None = None
    threat_model_origin: str | None = None
    context_state: str | None = None
    context_reason: str | None = None
    verification_enabled: bool = True
    verify_severity: str = "high"
    coverage_by_kind: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def severity_label(f: Finding) -> str:
    """``medium, reported high`` for an overstated finding; the severity otherwise."""
    return f"{f.severity}, reported {f.original_severity}" if f.original_severity else f.severity


def summary_line(s: Synthesis, o: Opinions) -> str:
    counts = verification_counts(s)
    checked = sum(n for status, n in counts.items() if status != "unverified")
    parts = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in sorted(counts.items()))
    if o.threat_model is not None:
        context = f"threat model: {md_inline(o.threat_model_origin or 'from the context packet')}"
    else:
        context = f"no threat model ({md_inline(o.context_reason or 'not written')})"
    threshold = (
        f"findings at or above {o.verify_severity} and doubtful duplicates were given to a verifier"
        if o.verification_enabled
        else "verification is off (verification_pass = false)"
    )
    total = sum(counts.values())
    return f"Second opinions: {checked} of {total} finding(s) checked ({parts or 'none'}); {threshold}; {context}."


def _at(place: Mapping[str, Any]) -> str:
    lines = f"{place['start_line']}" + (f"-{place['end_line']}" if place["end_line"] != place["start_line"] else "")
    return md_code(f"{place['file']}:{lines}")


def _citations(cited: Sequence[Mapping[str, Any]]) -> list[str]:
    out = []
    for c in cited:
        out += [f"- {md_inline(c.get('role') or 'cited')}: {_at(c)}", "", md_fence(c["quote"]), ""]
    return out


def verdict_lines(f: Finding) -> list[str]:
    """What the verifiers said of a kept finding, beside it."""
    if not f.verdicts and not f.merged_pairs:
        return []
    out = []
    for v in f.verdicts:
        verdict = v["verdict"].replace("_", " ")
        fair = (
            f" (fair severity {v['fair_severity']}, reported {f.original_severity})" if v.get("fair_severity") else ""
        )
        out.append(f"**Verification ({v['task_id']}):** {verdict}{fair}. {md_inline(v.get('rationale', ''))}")
        cited = ", ".join(f"{md_inline(c.get('role') or 'cited')} {_at(c)}" for c in v.get("cited", []))
        if cited:
            out.append(f"Cites: {cited}.")
    for m in f.merged_pairs:
        out.append(
            f"**Merged duplicate ({m['task_id']}):** a verifier judged two of these reports one defect. "
            f"{md_inline(m.get('rationale', ''))}"
        )
    if f.status == "disputed":
        out.append("The verifiers disagree: the finding keeps its reported severity until a person decides.")
    return out


def runtime_lines(f: Finding) -> list[str]:
    """Runtime evidence attached to a finding: its verdict, command and (escaped, fenced) output."""
    out = []
    for e in f.runtime_evidence:
        kind, verdict = md_inline(e.get("kind", "log")), e["verdict"].replace("_", " ")
        head = f"**Runtime evidence ({e['evidence_id']}, {kind}):** {verdict}"
        who = f" by {md_inline(e['added_by'])}" if e.get("added_by") else ""
        out.append(
            f"{head}{who} on {e['added_at']}" + (f", from {md_code(e['source'])}" if e.get("source") else "") + "."
        )
        if e.get("command"):
            out += ["", "Command:", "", md_fence(e["command"])]
        output = str(e.get("output", ""))
        shown = output[:MAX_OUTPUT_SHOWN].rstrip("\n")
        cut = len(output) > MAX_OUTPUT_SHOWN or e.get("truncated")
        out += [
            "",
            "Output" + (" (the beginning; the JSON report keeps what was stored)" if cut else "") + ":",
            "",
            md_fence(shown),
            "",
        ]
    if f.status == "reproduced" and any(v.get("verdict") == "false_positive" for v in f.verdicts):
        out.append(
            "A verifier refuted this finding by reading; running the code reproduced it, which outranks the reading."
        )
    return out


def refuted_section(s: Synthesis) -> list[str]:
    if not s.refuted:
        return []
    out = [
        "## Refuted findings",
        "",
        "Reported by a reviewer, then refuted by a verifier who found what defeats them. They are kept here with "
        "the counter-evidence, not deleted: read them if you doubt the verdict, and attach runtime evidence "
        "(`audit-mcp runtime-evidence`) to bring one back.",
        "",
    ]
    for f in s.refuted:
        out += [
            f"### {f.finding_id} [refuted, reported {f.severity}] {md_inline(f.title)}",
            f"{md_code(f'{f.file}:{f.start_line}-{f.end_line}')} · lens: {', '.join(f.lenses)} · category: "
            f"{f.category_id} · fingerprint: `{f.fingerprint}`",
            "",
            md_block(f.description),
            "",
            md_fence(f.evidence),
            "",
        ]
        for v in f.verdicts:
            out += [f"**Why it is refuted ({v['task_id']}):** {md_inline(v.get('rationale', ''))}", ""]
            out += _citations(v.get("cited", []))
    return out


def threat_model_section(o: Opinions) -> list[str]:
    out = ["## Threat model", ""]
    m = o.threat_model
    if m is None:
        return [*out, f"None was written: {md_inline(o.context_reason or 'the context packet was not answered')}.", ""]
    out += [
        f"Written by a reviewer before review began ({md_inline(o.threat_model_origin or 'context packet')}); every "
        "review and verification packet carried it. It is the reviewers' reading, not the engine's.",
        "",
        md_block(m["summary"]),
        "",
        "| entry point | exposure | reached by |",
        "|---|---|---|",
    ]
    for e in sorted(m.get("entry_points", []), key=lambda e: _EXPOSURE.index(e["exposure"])):
        out.append(
            f"| {md_code(e['path'], in_table=True)} {md_inline(e['name'], in_table=True)} | {e['exposure']} | "
            f"{md_inline(e['reached_by'], in_table=True)} |"
        )
    lists: tuple[tuple[str, str, _Line], ...] = (
        (
            "Trust boundaries",
            "trust_boundaries",
            lambda b: f"{md_inline(b['description'])} ({', '.join(md_code(p) for p in b['paths'])})",
        ),
        ("Assets", "assets", lambda a: f"{md_inline(a['name'])}: {md_inline(a['description'])}"),
        ("Dangerous sinks", "dangerous_sinks", lambda x: f"{md_code(x['path'])}: {md_inline(x['description'])}"),
        ("Existing controls", "controls", lambda c: f"{md_code(c['path'])}: {md_inline(c['description'])}"),
        ("Development-only", "development_only", lambda p: f"{md_code(p['path'])}: {md_inline(p['why'])}"),
        ("Test-only", "test_only", lambda p: f"{md_code(p['path'])}: {md_inline(p['why'])}"),
        ("Deprecated", "deprecated", lambda p: f"{md_code(p['path'])}: {md_inline(p['why'])}"),
    )
    for title, key, line in lists:
        if m.get(key):
            out += ["", f"**{title}:**", "", *(f"- {line(item)}" for item in m[key])]
    return [*out, ""]


def doubtful_section(s: Synthesis) -> list[str]:
    if not s.doubtful:
        return []
    out = ["## Doubtful duplicates", "", "Pairs the deduplicator could not tell apart; a verifier judged each one.", ""]
    for d in s.doubtful:
        state = "judged two distinct defects" if d.judged == "distinct" else "not judged yet"
        out.append(f"- {d.first.finding_id} and {d.second.finding_id}: {md_inline(d.why)}; {state}.")
    return [*out, ""]


def opinions_json(s: Synthesis, o: Opinions) -> dict[str, Any]:
    """The report JSON's ``threat_model``, ``context`` and ``verification`` members."""
    return {
        "threat_model": dict(o.threat_model) if o.threat_model is not None else None,
        "context": {"state": o.context_state, "reason": o.context_reason, "origin": o.threat_model_origin},
        "verification": {
            "enabled": o.verification_enabled,
            "threshold": o.verify_severity,
            "counts": verification_counts(s),
            "doubtful_pairs": [
                {"findings": [d.first.finding_id, d.second.finding_id], "why": d.why, "judged": d.judged}
                for d in s.doubtful
            ],
        },
    }
