"""The whole audit's forecast (``usecases.audit_forecast``) and the usage reported so far, in words for people:
the status table, the step prompts and the report all say them the same way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_NAMES = {"context": "context (threat model)", "review": "review", "verification": "verification"}


def audit_lines(doc: Mapping[str, Any]) -> list[str]:
    """The forecast in a few sentences: packets and runs by obligation, time, tokens and cost."""
    if not doc or not doc.get("packets"):
        return ["Nothing remains to dispatch."]
    per = doc.get("obligations") or {}
    parts = []
    for name, label in _NAMES.items():
        o = per.get(name) or {}
        if o.get("packets"):
            mark = "~" if o.get("estimated") else ""
            parts.append(f"{label} {mark}{o['packets']} in {o['runs']} run(s)")
    lines = [
        f"{_scope(doc)}: {doc['packets']} packet(s) in {doc['runs']} run(s) ({', '.join(parts)}), "
        f"{doc['time_range']} with {doc['host_width']} subagent(s) at a time at most."
    ]
    t = doc.get("tokens") or {}
    lines.append(
        f"Tokens: ~{t.get('input_without_caching', 0):,} input without prompt caching; with it, "
        f"~{t.get('input_with_caching', 0):,} fresh input and ~{t.get('cache_reads_with_caching', 0):,} cache reads; "
        f"~{t.get('output', 0):,} output."
    )
    lines.append(cost_line(doc.get("cost") or {}))
    for name in _NAMES:
        o = per.get(name) or {}
        if o.get("packets") and o.get("estimated"):
            lines.append(f"{_NAMES[name].capitalize()} is an estimate: {o.get('how', '')}.")
    return lines


def _scope(doc: Mapping[str, Any]) -> str:
    scope = str(doc.get("scope") or "the audit")
    return scope[:1].upper() + scope[1:]


def cost_line(cost: Mapping[str, Any]) -> str:
    """The forecast's cost, or what to configure to see one."""
    if cost.get("without_caching") is None:
        return f"Cost: not shown ({cost.get('note') or 'no prices are configured'})."
    currency = cost.get("currency") or ""
    text = f"Cost: ~{cost['without_caching']:,.2f} {currency} without prompt caching"
    if cost.get("with_caching") is not None:
        text += f", ~{cost['with_caching']:,.2f} {currency} with it"
    prices = cost.get("prices") or {}
    text += f" (prices from {prices.get('from')})" if prices.get("from") else ""
    return text + (f"; {cost['note']}." if cost.get("note") else ".")


def usage_line(used: Mapping[str, Any]) -> str:
    """What the runs reported using, and what that cost where prices are configured."""
    if not used.get("packets_reporting"):
        return (
            "Used: no usage was reported (hosts pass `usage` to submit_packet; `audit-mcp run` reads what Claude "
            "Code and Codex workers print)."
        )
    u = used.get("usage") or {}
    text = (
        f"Used, as {used['packets_reporting']} of {used['packets_merged']} merged packet(s) reported: "
        f"{u.get('input_tokens', 0):,.0f} input tokens (as reported: workers count uncached input and cache writes), "
        f"{u.get('output_tokens', 0):,.0f} "
        f"output tokens, {u.get('api_calls', 0):,.0f} call(s), {u.get('seconds', 0) / 60:,.1f} subagent-minute(s)"
    )
    if used.get("cost") is not None:
        text += f"; ~{used['cost']:,.2f} {used.get('currency') or ''} at the configured prices"
    return text + "."
