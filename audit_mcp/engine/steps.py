"""Rendering the Step handed to the host, and its prompt, from ``prompts/steps/``."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit_mcp.core.escape import md_block, md_code
from audit_mcp.core.forecast_text import audit_lines
from audit_mcp.core.models import HostCapabilities, Step
from audit_mcp.core.userstate import state_arguments
from audit_mcp.engine.dispatch_rules import opening, rolling_rules, whole_wave_rules
from audit_mcp.engine.launch_lists import Launch, plan_reading, queue_table, waves_table
from audit_mcp.engine.obligation_lines import KIND_NOTES, forecast_line, obligations_line
from audit_mcp.engine.templates import render

TIER_MODELS = {
    "small": "your fastest, cheapest model (e.g. a Haiku-class model)",
    "standard": "your default model (e.g. a Sonnet-class model)",
    "deep": "your strongest model (e.g. an Opus-class model)",
}


@dataclass
class StepContext:
    kind: str
    status: str
    run_id: str | None
    reason: str
    caps: HostCapabilities
    root: Path
    artifacts_dir: Path
    coverage: dict[str, int] = field(default_factory=dict)
    completeness: str = "unknown"
    plan: dict[str, Any] | None = None
    plan_path: Path | None = None
    outstanding: list[dict[str, Any]] = field(default_factory=list)
    submitted: list[str] = field(default_factory=list)
    waves: list[int] = field(default_factory=list)  # the outstanding packets' waves, as the scheduler cut them
    report_path: Path | None = None
    command: tuple[str, ...] = ("audit-mcp",)  # runs this installation (by absolute path, see core.executable)
    forecast: dict[str, Any] | None = None  # the next run, before it is dispatched (usecases.forecasting)
    # The whole audit, before its first dispatch (usecases.audit_forecast): the step's forecast.audit.
    audit_forecast: dict[str, Any] | None = None
    retry_after_seconds: float | None = None  # a wait step: when to call next_step again
    obligations: dict[str, dict[str, int]] = field(default_factory=dict)  # cells by kind, then state


def _cli(ctx: StepContext, verb: str, *args: str) -> str:
    base = [*ctx.command, verb, "--root", str(ctx.root), "--artifacts-dir", str(ctx.artifacts_dir), *state_arguments()]
    return " ".join([*(shlex.quote(part) for part in base), *args])


def _coverage_line(ctx: StepContext) -> str:
    c = ctx.coverage
    if not c:
        return "No coverage matrix yet."
    carried = f"{c['carried']} carried from earlier audits (content unchanged), " if c.get("carried") else ""
    return (
        f"{c.get('total', 0)} cells: {c.get('reviewed', 0)} reviewed, {carried}{c.get('not_applicable', 0)} not "
        f"applicable, {c.get('pending', 0)} pending, {c.get('assigned', 0)} assigned, {c.get('failed', 0)} "
        f"failed. Completeness: {ctx.completeness}." + obligations_line(ctx.obligations)
    )


def _launch_offsets(outstanding: list[dict[str, Any]]) -> dict[str, float]:
    """Each outstanding packet's earliest start, in seconds after the first one starts (only those above zero).

    The plan counts from the run's first start; a resumed run counts again from its first outstanding packet.
    """
    raw = {p["packet_id"]: float(p.get("not_before_seconds") or 0.0) for p in outstanding}
    base = min(raw.values(), default=0.0)
    return {packet: round(at - base, 1) for packet, at in raw.items() if at - base > 0}


def _audit_note(forecast: dict[str, Any]) -> str:
    """The whole audit's forecast, for the host to tell the user before any subagent starts."""
    return "The whole audit, to tell the user before any subagent starts: " + " ".join(audit_lines(forecast))


def _with_audit(forecast: dict[str, Any] | None, whole: dict[str, Any] | None) -> dict[str, Any] | None:
    """The step's forecast: the run's, with the whole audit's under ``audit`` before the first dispatch."""
    if whole is None:
        return forecast
    return {**(forecast or {}), "audit": whole}


def _dispatch(ctx: StepContext) -> tuple[str, list[str], str, dict[str, Any]]:
    assert ctx.plan is not None and ctx.run_id is not None and ctx.plan_path is not None
    waves = ctx.waves
    planned = ctx.plan.get("schedule") or {}
    forecast = planned.get("forecast")
    mode = planned.get("dispatch_mode") or planned.get("wave_kind") or "whole_wave"
    schedule_note = (
        f"Launch order: as listed below, longest work first. Why this width: {planned['reasoning']}"
        if planned.get("reasoning")
        else "Launch order: as listed below, longest work first."
    )
    if forecast:
        shape = (
            f"{forecast['packets']} packet(s), at most {waves[0] if waves else 0} at a time"
            if mode == "rolling"
            else f"{forecast['packets']} packet(s) in {forecast['waves']} wave(s)"
        )
        schedule_note += (
            f" Forecast: {shape}, ~{forecast['estimated_input_tokens']:,} input tokens, {forecast['time_range']}."
        )
    if ctx.audit_forecast:
        schedule_note += " " + _audit_note(ctx.audit_forecast)
    if planned.get("oversize_packets"):
        schedule_note += (
            " Warning: packet(s) " + ", ".join(planned["oversize_packets"]) + " may exceed the "
            "model's per-minute input or output budget; expect rate-limit errors for them."
        )
    model_rule = (
        "Choose each subagent's model from its packet's tier: "
        + "; ".join(f"`{tier}` → {desc}" for tier, desc in TIER_MODELS.items())
        + "."
        if ctx.caps.can_select_subagent_model
        else "Use your default model for every subagent (the tier is only a hint)."
    )
    tools_rule = (
        "Give review subagents only read and search tools plus `submit_packet` (or a shell for the "
        "`audit-mcp submit-packet` command). They never edit files or run the code under review."
        if ctx.caps.can_restrict_subagent_tools
        else "Tell each subagent it must not edit files or run the code under review."
    )
    cooldown = ctx.plan.get("cooldown_until")
    cooldown_rule = (
        f"Do not launch any subagent before {cooldown} (UTC): the model's rate limit asked for a pause."
        if cooldown
        else f"No rate-limit cooldown is active: start {'now' if mode == 'rolling' else 'the first wave now'}."
    )
    offsets = _launch_offsets(ctx.outstanding)
    launch = Launch(ctx.run_id, ctx.artifacts_dir, ctx.plan_path, ctx.plan, ctx.outstanding)
    interval = planned.get("launch_interval_seconds") or None
    width = waves[0] if waves else 0
    rules = rolling_rules(ctx.run_id, width, offsets) if mode == "rolling" else whole_wave_rules(ctx.run_id, offsets)
    # Commands that work as pasted: the optional parts (failures, launched packets) are described, not filled
    # with placeholders that would fail.
    status_cli = _cli(ctx, "plan-status", "--run-id", ctx.run_id)
    merge_cli = _cli(ctx, "merge-and-ingest", "--run-id", ctx.run_id)
    resumed = (
        f"{len(ctx.submitted)} packet(s) of this run are already submitted ({', '.join(ctx.submitted)}); "
        "do not launch them again."
        if ctx.submitted
        else "No packet of this run is submitted yet."
    )
    prompt = render(
        "steps/dispatch_review.md",
        run_id=ctx.run_id,
        plan_reading=plan_reading(launch),
        opening=opening(ctx.run_id, mode, len(ctx.outstanding), waves),
        waves_table=queue_table(launch, width, offsets) if mode == "rolling" else waves_table(launch, waves, offsets),
        resumed=resumed,
        model_rule=model_rule,
        tools_rule=tools_rule,
        cooldown_rule=cooldown_rule,
        launch_rule=rules.launch,
        pace_rule=rules.pace,
        check_rule=rules.check,
        status_cli=status_cli,
        schedule_note=schedule_note,
        merge_cli=merge_cli,
        coverage_line=_coverage_line(ctx),
        packet_kinds=KIND_NOTES.get(ctx.plan.get("packet_kind", "review"), KIND_NOTES["review"]),
    )
    actions = [
        rules.action + ': "Read and follow the instructions in <prompt_path>"',
        f'plan_status(run_id="{ctx.run_id}", failures=[{{packet_id, error}}...], launched=[packet_id...])',
        status_cli,
        f'merge_and_ingest(run_id="{ctx.run_id}", failures=[{{packet_id, error}}...])',
        merge_cli,
        "next_step()",
    ]
    stop = (
        f"Stop dispatching once every packet of run {ctx.run_id} has finished or failed; call merge_and_ingest "
        "once, then next_step."
    )
    extra = {
        "wave_size": waves[0] if waves else 0,
        "waves": waves,
        "dispatch_mode": planned.get("dispatch_mode") or planned.get("wave_kind"),
        "packets_outstanding": len(ctx.outstanding),
        "packet_ids": [p["packet_id"] for p in ctx.outstanding],
        "cooldown_until": cooldown,
        "forecast": _with_audit(forecast, ctx.audit_forecast),
        "launch_offsets": offsets or None,
        "launch_interval_seconds": interval if offsets else None,
    }
    return prompt, actions, stop, extra


def _single(ctx: StepContext) -> tuple[str, list[str], str, dict[str, Any]]:
    assert ctx.run_id is not None
    packet = ctx.outstanding[0]
    # The results file the packet prompt names (its token is sealed for this host): the command works as pasted
    # once the reviewer has written it.
    results = packet.get("results_path") or "results.json"
    submit_cli = _cli(
        ctx, "submit-packet", "--run-id", ctx.run_id, "--packet-id", packet["packet_id"], "--results", results
    )
    prompt = render(
        "steps/single_task_fallback.md",
        run_id=ctx.run_id,
        packet_id=packet["packet_id"],
        prompt_path=packet["prompt_path"],
        prompt_uri=packet["prompt_uri"],
        task_count=str(len(packet["tasks"])),
        submit_cli=submit_cli,
        next_cli=_cli(ctx, "next-step"),
        coverage_line=_coverage_line(ctx) + (f"\n\n{_audit_note(ctx.audit_forecast)}" if ctx.audit_forecast else ""),
    )
    actions = [
        f'submit_packet(run_id="{ctx.run_id}", packet_id="{packet["packet_id"]}", results=[...])',
        submit_cli,
        "next_step()",
    ]
    stop = f"Stop after packet {packet['packet_id']} is accepted; then call next_step."
    extra = {"wave_size": 1, "waves": [1], "packets_outstanding": 1, "packet_ids": [packet["packet_id"]]}
    if ctx.audit_forecast:
        extra["forecast"] = {"audit": ctx.audit_forecast}
    return prompt, actions, stop, extra


def render_step(ctx: StepContext, prompt_path: Path) -> tuple[Step, str]:
    extra: dict[str, Any] = {}
    if ctx.kind == "dispatch_review":
        prompt, actions, stop, extra = _dispatch(ctx)
    elif ctx.kind == "single_task_fallback":
        prompt, actions, stop, extra = _single(ctx)
    elif ctx.kind == "capability_check":
        can_cli = _cli(ctx, "next-step", "--host-can-dispatch-subagents", "true", "--host-max-active-subagents", "4")
        cannot_cli = _cli(ctx, "next-step", "--host-can-dispatch-subagents", "false")
        prompt = render(
            "steps/capability_check.md",
            can_cli=can_cli,
            cannot_cli=cannot_cli,
            coverage_line=_coverage_line(ctx),
            forecast_line=forecast_line(ctx.forecast)
            + (f"\n\n{_audit_note(ctx.audit_forecast)}" if ctx.audit_forecast else ""),
        )
        extra = {"forecast": _with_audit(ctx.forecast, ctx.audit_forecast)}
        actions = [
            "next_step(host_can_dispatch_subagents=true|false, host_max_active_subagents=N, "
            "host_can_restrict_subagent_tools=true|false, host_can_select_subagent_model=true|false, "
            'host_model="...")',
            can_cli,
            cannot_cli,
        ]
        stop = "Stop after answering once with next_step; do not run shell commands to find out."
    elif ctx.kind == "wait":
        assert ctx.retry_after_seconds is not None
        prompt = render(
            "steps/wait.md",
            run_id=str(ctx.run_id),
            reason=md_block(ctx.reason),  # it names hosts, which come from their environment
            retry_after=f"{ctx.retry_after_seconds:g}",
            next_cli=_cli(ctx, "next-step"),
            coverage_line=_coverage_line(ctx),
        )
        actions = [f"wait {ctx.retry_after_seconds:g} seconds", "next_step()", _cli(ctx, "next-step")]
        stop = f"Stop now; call next_step again after {ctx.retry_after_seconds:g} seconds."
        extra = {"retry_after_seconds": ctx.retry_after_seconds, "packets_outstanding": 0}
    elif ctx.kind == "present_report":
        assert ctx.report_path is not None
        prompt = render(
            "steps/present_report.md",
            report_path=str(ctx.report_path),
            page_path=str(ctx.artifacts_dir / "report" / "report.html"),
            report_cli=_cli(ctx, "report"),
            evidence_cli=_cli(ctx, "runtime-evidence"),
            coverage_line=_coverage_line(ctx),
        )
        actions = ["read resource audit://report", f"read file {ctx.report_path}", _cli(ctx, "report")]
        stop = "Stop after presenting the report; do not call the server again for this audit."
    else:
        prompt = render(
            "steps/blocked.md",
            reason=md_block(ctx.reason),  # it can quote a subagent's error text or a repository's config
            status_cli=_cli(ctx, "status"),
            coverage_line=_coverage_line(ctx),
            handoff_path=md_code(ctx.artifacts_dir / "steps" / "operator-handoff.md"),
        )
        actions = ["report the blocker to the user verbatim", _cli(ctx, "status")]
        stop = "Stop now and report the blocker; do not retry until a person has fixed its cause."
    summary = prompt.split("\n\n", 2)[1].strip() if prompt.count("\n\n") >= 2 else prompt.strip()
    paths = {
        "step": str(ctx.artifacts_dir / "steps" / "current-step.json"),
        "prompt": str(prompt_path),
        "report": str(ctx.artifacts_dir / "report" / "report.md"),
        "report_json": str(ctx.artifacts_dir / "report" / "report.json"),
        "report_html": str(ctx.artifacts_dir / "report" / "report.html"),
    }
    if ctx.plan_path is not None:
        paths["plan"] = str(ctx.plan_path)
    if ctx.kind == "blocked":
        paths["operator_handoff"] = str(ctx.artifacts_dir / "steps" / "operator-handoff.json")
        paths["operator_handoff_md"] = str(ctx.artifacts_dir / "steps" / "operator-handoff.md")
    step = Step(
        step_kind=ctx.kind,  # type: ignore[arg-type]
        status=ctx.status,  # type: ignore[arg-type]
        run_id=ctx.run_id,
        summary=summary,
        prompt_path=str(prompt_path),
        allowed_actions=actions,
        stop_condition=stop,
        repo_root=str(ctx.root),
        artifacts_dir=str(ctx.artifacts_dir),
        artifact_paths=paths,
        reason=ctx.reason,
        host=ctx.caps,
        coverage=ctx.coverage,
        completeness=ctx.completeness,
        obligations=ctx.obligations,
        **extra,
    )
    return step, prompt
