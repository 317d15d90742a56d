"""Runtime evidence: what running the code showed about a finding, attached by a host, a person or CI.

The evidence (a reproduction and its output, a failing test, a crash log) is untrusted text: decoded as
UTF-8 with replacement, stripped of control characters, capped (a long output keeps its beginning and its
end), stored under the finding's fingerprint so it follows the finding when ids move, and escaped where
it is rendered. A finding with reproduced evidence outranks unverified ones; once the audit's report is
written, attaching evidence writes it again.
"""

from __future__ import annotations

from typing import Any

from audit_mcp.core.errors import InputError, NotFoundError
from audit_mcp.core.escape import md_block, md_fence
from audit_mcp.core.models import EvidenceReceipt
from audit_mcp.engine.checks import clean_text
from audit_mcp.engine.templates import render
from audit_mcp.findings.assessment import assess
from audit_mcp.findings.model import Finding
from audit_mcp.findings.synthesis import synthesize
from audit_mcp.usecases import reporting
from audit_mcp.usecases.verifying import judged_same
from audit_mcp.usecases.workspace import Workspace

EVIDENCE_VERDICTS = ("reproduced", "not_reproduced")
EVIDENCE_KINDS = ("reproduction", "failing_test", "crash_log", "log")
MAX_OUTPUT_CHARS = 64_000
_HEAD_CHARS = 48_000
MAX_COMMAND_CHARS = 2_000
MAX_INPUT_CHARS = 4_000_000


def _assessed(ws: Workspace) -> tuple[int, list[Finding]]:
    with ws.store.read() as tx:
        audit = ws.require_audit(tx)
        opinions, evidence = tx.finding_verdicts(audit.audit_id), tx.runtime_evidence(audit.audit_id)
        merged = synthesize(tx.findings(audit.audit_id), same=judged_same(opinions))
    s = assess(merged, opinions, evidence)
    return audit.audit_id, [*s.findings, *s.refuted]


def find(ws: Workspace, finding: str) -> Finding:
    """A finding of the current audit by id (``F003``) or by any of its fingerprints."""
    key = finding.strip()
    _, findings = _assessed(ws)
    hit = next((f for f in findings if f.finding_id == key.upper() or key.lower() in f.aliases), None)
    if hit is None:
        ids = ", ".join(f.finding_id for f in findings[:40]) or "none yet"
        raise NotFoundError(
            f"finding {key!r} is not in the current audit; give a finding id from the report ({ids}) or a fingerprint"
        )
    return hit


def _capped(text: str) -> tuple[str, bool]:
    if len(text) <= MAX_OUTPUT_CHARS:
        return text, False
    tail = MAX_OUTPUT_CHARS - _HEAD_CHARS
    cut = len(text) - MAX_OUTPUT_CHARS
    return f"{text[:_HEAD_CHARS]}\n[... {cut} characters cut ...]\n{text[-tail:]}", True


def _problems(finding: Any, verdict: Any, kind: Any, output: Any, command: Any) -> list[tuple[str, str]]:
    problems = []
    if not isinstance(finding, str) or not finding.strip():
        problems.append(("/finding", "give the finding's id from the report (F003) or its fingerprint"))
    if verdict not in EVIDENCE_VERDICTS:
        problems.append(("/verdict", f"verdict {verdict!r} is not one of {', '.join(EVIDENCE_VERDICTS)}"))
    if kind not in EVIDENCE_KINDS:
        problems.append(("/kind", f"kind {kind!r} is not one of {', '.join(EVIDENCE_KINDS)}"))
    if not isinstance(output, str | bytes) or len(output) > MAX_INPUT_CHARS:
        problems.append(("/output", f"the output must be text of at most {MAX_INPUT_CHARS} characters"))
    elif not (output.decode("utf-8", "replace") if isinstance(output, bytes) else output).strip():
        problems.append(("/output", "the output is empty; attach what the command printed (or the crash log)"))
    if command is not None and (not isinstance(command, str) or len(command) > MAX_COMMAND_CHARS):
        problems.append(("/command", f"the command must be text of at most {MAX_COMMAND_CHARS} characters"))
    return problems


def attach(
    ws: Workspace,
    finding: str,
    verdict: str,
    output: str | bytes,
    *,
    command: str | None = None,
    kind: str = "reproduction",
    source: str | None = None,
    added_by: str = "host",
) -> EvidenceReceipt:
    """Store runtime evidence for a finding and write the report again if it is written already."""
    if problems := _problems(finding, verdict, kind, output, command):
        raise InputError(problems, "Nothing was attached. Fix the arguments and attach again.")
    target = find(ws, finding)
    text = output.decode("utf-8", errors="replace") if isinstance(output, bytes) else output
    stored, truncated = _capped(clean_text(text))
    payload: dict[str, Any] = {"kind": kind, "output": stored, "truncated": truncated, "added_by": added_by}
    if command:
        payload["command"] = clean_text(command).strip()
    if source:
        payload["source"] = clean_text(source)[:300]
    now = ws.now()
    with ws.store.write() as tx:
        audit = ws.require_audit(tx)
        evidence_id = tx.add_runtime_evidence(
            audit.audit_id, fingerprint=target.fingerprint, verdict=verdict, payload=payload, now=now
        )
        tx.log(
            now=now,
            audit_id=audit.audit_id,
            actor=added_by,
            action="runtime_evidence",
            detail=f"{target.finding_id} ({target.fingerprint}): {verdict}, {kind}, {len(stored)} character(s)"
            + (" (cut)" if truncated else ""),
            outcome="recorded",
        )
        synthesized = audit.synthesized_at is not None
    if synthesized:
        reporting.write_report_files(ws)  # synthesized: the written report stays final
    after = find(ws, target.fingerprint)
    return EvidenceReceipt(
        accepted=True,
        evidence_id=evidence_id,
        finding_id=after.finding_id,
        fingerprint=after.fingerprint,
        verdict=verdict,  # type: ignore[arg-type]  # checked against EVIDENCE_VERDICTS above
        status=after.status,
        severity=after.severity,
        stored_chars=len(stored),
        truncated=truncated,
        report_updated=synthesized,
        next_action=(
            "Recorded; the report files were written again with it."
            if synthesized
            else "Recorded; the report shows it once written (the audit is still running)."
        ),
    )


def instructions(ws: Workspace, finding: str, evidence_cli: str) -> str:
    """The runtime prompt for one finding: how to check it by running the code, and how to attach the result."""
    f = find(ws, finding)
    verdict = f.verdicts[-1]["verdict"].replace("_", " ") if f.verdicts else None
    return render(
        "steps/runtime_evidence.md",
        finding_id=f.finding_id,
        title=md_block(f.title),
        severity=f.severity if not f.original_severity else f"{f.severity}, reported {f.original_severity}",
        category=f.category_id,
        location=f"{f.file}:{f.start_line}-{f.end_line}",
        symbol=f" in `{f.symbol}`" if f.symbol and "`" not in f.symbol else "",
        status=f.status.replace("_", " "),
        description=md_block(f.description),
        evidence=md_fence(f.evidence),
        verification_note=f", and a verifier judged it {verdict}" if verdict else "",
        evidence_cli=evidence_cli,
        max_kib=str(MAX_OUTPUT_CHARS // 1000),
    )
