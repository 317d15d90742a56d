"""The MCP surface: tools, resources and a prompt over ``AuditService``.

Errors the caller must act on become ``ToolError`` here, at the edge.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import ToolAnnotations

from audit_mcp.core.errors import AuditError, NotFoundError
from audit_mcp.core.models import (
    MergeSummary,
    PlanStatus,
    Problem,
    QuotaStatus,
    Receipt,
    StatusView,
    Step,
)
from audit_mcp.core.progress import Progress
from audit_mcp.core.version import __version__
from audit_mcp.engine.inputs import Submission
from audit_mcp.engine.plan_pages import PAGE_CHARS
from audit_mcp.surfaces import params as p
from audit_mcp.surfaces.channels import STATE_URIS, STEP_URIS, SessionChannels, digest
from audit_mcp.surfaces.completions import install_completions
from audit_mcp.surfaces.edges import AuditServer, prompt_call, resource_read, tool_call
from audit_mcp.surfaces.evidence_tools import register_evidence_tools
from audit_mcp.surfaces.operator_tools import register_operator_tools
from audit_mcp.surfaces.page_route import install_page
from audit_mcp.surfaces.roots import Registry
from audit_mcp.usecases import packet_render
from audit_mcp.usecases.service import AuditService, render_prompt
from audit_mcp.usecases.workspace import Clock

T = TypeVar("T")

INSTRUCTIONS = (
    "audit-mcp runs a complete, systematic code audit of a repository. Call next_step, do exactly what the "
    "returned step says (its prompt is the resource audit://step/current/prompt), and call next_step again "
    "until the step kind is present_report or blocked."
)


def _reporter(ctx: Context, channels: SessionChannels) -> Progress:
    """Progress from the engine's worker thread: a progress notification, and an info log message per call for
    a session that takes info messages."""
    session = ctx.request_context.session

    async def send(done: float, total: float | None, message: str) -> None:
        try:
            await ctx.report_progress(done, total, message)
            if not channels.wants_log(session, "info"):
                return
            # Logging is deprecated from protocol 2026-07-28 on, where the session sends only what a request
            # opted into; older sessions still show these messages in the host's log.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await session.send_log_message(
                    level="info", data=message, logger="audit-mcp", related_request_id=ctx.request_id
                )
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # the client went away; progress is best effort, the work goes on

    def report(done: float, total: float | None, message: str) -> None:
        anyio.from_thread.run(send, done, total, message)

    return report


def _client_name(ctx: Context | None) -> str | None:
    if ctx is None:
        return None
    try:
        params = ctx.session.client_params
    except (AttributeError, LookupError, ValueError):
        return None
    info = getattr(params, "client_info", None) if params is not None else None
    return getattr(info, "name", None)


def build_server(
    root: Path | None = None,
    artifacts_dir: Path | None = None,
    *,
    config_path: Path | None = None,
    clock: Clock | None = None,
    allowed_roots: Sequence[Path] = (),
    store: str | None = None,
    audit_name: str | None = None,
    page_security: TransportSecuritySettings | None = None,
    **settings: Any,
) -> MCPServer:
    """The server for ``root`` (default: the working directory) and the ``allowed_roots``; a ``root`` argument
    naming any other folder is refused. ``page_security``: serve the audit page at ``/`` of its HTTP app,
    behind these Host/Origin settings (the ones its ``/mcp`` gets)."""
    registry = Registry(root, artifacts_dir, config_path, clock, allowed_roots, (store, audit_name))
    server = AuditServer("audit-mcp", version=__version__, instructions=INSTRUCTIONS, **settings)
    channels = SessionChannels()
    channels.install(server)
    install_completions(server, lambda run_id: registry.for_run(run_id) if run_id else current(), registry.roots)

    @server.tool(
        title="Next audit step",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    async def next_step(
        ctx: Context,
        root: p.Root = None,
        host_can_dispatch_subagents: p.CanDispatch = None,
        host_can_restrict_subagent_tools: p.CanRestrict = None,
        host_can_select_subagent_model: p.CanSelectModel = None,
        host_max_active_subagents: p.MaxActive = None,
        host_model: p.HostModel = None,
        host_dispatch_mode: p.DispatchMode = None,
        new_audit: p.NewAudit = False,
        retry_blocked: p.RetryBlocked = False,
        since: p.Since = None,
        analyzer_results: p.AnalyzerResults = None,
    ) -> Step:
        """Advance the audit and return the one step the host must do next.

        The server runs every deterministic obligation it can, then returns a step (capability_check,
        dispatch_review, single_task_fallback, present_report, blocked): read its prompt (resource
        audit://step/current/prompt) and do exactly that. Capability arguments answer a capability_check and
        are remembered. `new_audit` starts a fresh audit after a finished one; `retry_blocked` clears a fixed
        blocker; `since` and `analyzer_results` apply to an audit that starts in this call.
        """
        service = tool_call(lambda: registry.get(root))
        registry.current = service
        caps = {
            "can_dispatch_subagents": host_can_dispatch_subagents,
            "can_restrict_subagent_tools": host_can_restrict_subagent_tools,
            "can_select_subagent_model": host_can_select_subagent_model,
            "max_active_subagents": host_max_active_subagents,
            "dispatch_mode": host_dispatch_mode,
            "model": host_model,
        }
        progress = _reporter(ctx, channels)
        client = _client_name(ctx)
        step_files = (service.step_json_path, service.step_prompt_path)
        before = digest(step_files)
        step = await anyio.to_thread.run_sync(
            lambda: tool_call(
                lambda: service.next_step(
                    caps,
                    client_name=client,
                    new_audit=new_audit,
                    retry_blocked=retry_blocked,
                    progress=progress,
                    since=since,
                    analyzer_files=analyzer_results or (),
                )
            )
        )
        await channels.changed(ctx, (STEP_URIS if digest(step_files) != before else ()) + STATE_URIS)
        return step

    @server.tool(
        title="Submit a review packet",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    async def submit_packet(
        ctx: Context,
        run_id: p.RunId,
        packet_id: p.PacketId,
        results: p.Results,
        usage: p.UsageIn = None,
    ) -> Receipt:
        """Hand in one packet's review results, one per task, as its packet prompt describes them.

        The receipt says accepted, or lists every error with its location and fix; nothing is recorded until
        a submission is accepted. The same results twice change nothing; a corrected resubmission replaces a
        refused one. `usage`: what the review cost, as far as known (it sizes later waves).
        """
        holder = await anyio.to_thread.run_sync(lambda: tool_call(lambda: registry.holder(run_id)))
        if holder is None:
            return Receipt(
                accepted=False,
                run_id=str(run_id)[:200],
                packet_id=str(packet_id)[:200],
                errors=[Problem(location="/run_id", message=registry.unknown(run_id))],
                next_action="Nothing was recorded. Submit with the run_id and packet_id of your packet prompt.",
            )
        receipt = await anyio.to_thread.run_sync(
            lambda: tool_call(lambda: holder.submit_packet(run_id, packet_id, results, usage))
        )
        if receipt.accepted and not receipt.duplicate:
            await channels.changed(ctx, ("audit://status",))
        return receipt

    @server.tool(
        title="Merge a review run",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    async def merge_and_ingest(ctx: Context, run_id: p.RunId, failures: p.Failures = None) -> MergeSummary:
        """Fold a run's accepted submissions into the coverage matrix, once every wave has finished.

        `failures` lists the packets whose subagent failed: [{"packet_id": ..., "error": "<the error text
        you saw>"}]. A packet neither submitted nor listed counts as failed. Failed work is re-issued up
        to the retry budget; rate-limit errors set a cooldown. Call next_step afterwards.
        """
        progress = _reporter(ctx, channels)
        reported: Any = failures or []  # raw JSON: the use case checks it against the same models
        summary = await anyio.to_thread.run_sync(
            lambda: tool_call(lambda: registry.for_run(run_id).merge_and_ingest(run_id, reported, progress=progress))
        )
        if not summary.already_merged:
            await channels.changed(ctx, STATE_URIS)
        return summary

    @server.tool(
        title="Plan status between waves",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    )
    def plan_status(run_id: p.RunId, failures: p.FailuresSoFar = None, launched: p.Launched = None) -> PlanStatus:
        """What to do now with a run's packets not launched yet: the width, the cooldown, each packet's
        earliest start. Call it between waves (rolling: whenever a subagent finishes), with the `failures` so
        far (remembered for merge_and_ingest) and the packet ids `launched`.
        """
        reported: Any = failures or []  # raw JSON: the use case checks it against the same models
        return tool_call(lambda: registry.for_run(run_id).plan_status(run_id, reported, launched or []))

    @server.tool(
        title="Quota and wave schedule",
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )
    def quota_status(root: p.Root = None, host_model: p.HostModel = None, provider: p.Provider = None) -> QuotaStatus:
        """The model's resolved limits (each with source and confidence), what was learned from rate-limit
        errors (max_safe_concurrency, cooldown, last 429), the wave schedule the server would give now, a
        forecast of the work still open, and where the learned state lives."""
        return tool_call(lambda: registry.get(root).quota(host_model, provider))

    @server.tool(
        title="Audit status",
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )
    def audit_status(root: p.Root = None) -> StatusView:
        """Coverage by lens and state, runs so far, findings by severity, the blocker if any, recent events."""
        return tool_call(lambda: registry.get(root).status())

    def current() -> AuditService:
        return registry.current or registry.get(None)

    def read_text(path: Path, what: str) -> str:
        if not path.is_file():
            raise ResourceNotFoundError(f"{what} does not exist yet; call the next_step tool first")
        return path.read_text(encoding="utf-8")

    @server.resource("audit://step/current", mime_type="application/json", title="Current step")
    def step_current() -> str:
        """The current step as JSON (also steps/current-step.json in the artifacts directory)."""
        return read_text(current().step_json_path, "the current step")

    @server.resource("audit://step/current/prompt", mime_type="text/markdown", title="Current step prompt")
    def step_prompt() -> str:
        """What the host must do now, as Markdown."""
        return read_text(current().step_prompt_path, "the current step prompt")

    def plan_json(run_id: str, **where: Any) -> str:
        try:
            view = registry.for_run(run_id).plan_view(run_id, **where)
        except NotFoundError as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        except AuditError as exc:
            raise ResourceError(str(exc)) from exc
        compact = json.dumps(view, separators=(",", ":"))
        # Pages are sized as compact JSON; only what is well inside a page gets the readable layout.
        return json.dumps(view, indent=1) if len(compact) * 1.3 < PAGE_CHARS else compact

    @server.resource(
        "audit://runs/{run_id}/dispatch-plan{?cursor,limit}", mime_type="application/json", title="Dispatch plan"
    )
    def dispatch_plan(run_id: str, cursor: str | None = None, limit: int | None = None) -> str:
        """A run's dispatch plan in pages of under ~20k tokens: the summary (wave size, waves, cooldown,
        schedule, one `wave_pages` entry per wave), then packets in launch order with their prompts and tasks.
        Follow `page.next_uri` (`?cursor=N`) until it is null; `limit` caps the packets of a page. A plan
        that fits one page comes whole. The file dispatch-plan.json holds the whole plan."""
        return plan_json(run_id, cursor=cursor, limit=limit)

    @server.resource(
        "audit://runs/{run_id}/dispatch-plan/waves/{wave}", mime_type="application/json", title="Dispatch wave"
    )
    def dispatch_wave(run_id: str, wave: int) -> str:
        """One wave of a run's plan: each packet's prompt, model tier, size and start offset, in launch order
        (also runs/<run_id>/waves/wave-NN.json); `next_wave_uri` is the wave after it."""
        return plan_json(run_id, wave=wave)

    @server.resource(
        "audit://runs/{run_id}/packets/{packet_id}/prompt", mime_type="text/markdown", title="Packet prompt"
    )
    def packet_prompt(run_id: str, packet_id: str) -> str:
        """The prompt a review subagent follows for one packet."""
        service = resource_read(lambda: registry.for_run(run_id))
        if packet_id not in resource_read(lambda: service.packet_ids(run_id)):
            raise ResourceNotFoundError(f"run {run_id} has no packet {packet_id!r}; take its id from the dispatch plan")
        return resource_read(lambda: packet_render.packet_prompt_text(service, run_id, packet_id))

    @server.resource("audit://report", mime_type="text/markdown", title="Audit report")
    def report() -> str:
        """The audit report (provisional until the audit is complete)."""
        return resource_read(lambda: current().report("md"))

    @server.resource("audit://report/json", mime_type="application/json", title="Audit report (JSON)")
    def report_json() -> str:
        """The audit report as JSON (docs/reports.md describes its fields)."""
        return resource_read(lambda: current().report("json"))

    @server.resource("audit://report/sarif", mime_type="application/sarif+json", title="Audit report (SARIF)")
    def report_sarif() -> str:
        """The audit report as SARIF 2.1.0, for code-scanning tools."""
        return resource_read(lambda: current().report("sarif"))

    @server.resource("audit://schemas/submission", mime_type="application/schema+json", title="Submission schema")
    def submission_schema() -> str:
        """The JSON schema of a submit_packet call with every field described, its bounds and choices (the
        tool's own input schema is its skeleton)."""
        return json.dumps(Submission.model_json_schema(), indent=2)

    @server.resource("audit://coverage", mime_type="application/json", title="Coverage summary")
    def coverage() -> str:
        """Coverage totals by state and lens, and the audit's completeness."""
        return resource_read(lambda: json.dumps(current().coverage(), indent=2))

    @server.resource("audit://status", mime_type="application/json", title="Audit status")
    def status() -> str:
        """Coverage by lens and state, runs and waves, findings by severity, gaps, and what remains."""
        return current().status().model_dump_json(indent=2)

    @server.prompt(title="Start an audit")
    def start_audit(root: p.PromptRoot = "") -> str:
        """Audit a repository from start to report with the next_step loop."""
        target = root or str(prompt_call(lambda: registry.get(None)).root)
        return render_prompt(
            "mcp/start_audit.md", root=target, root_argument=f" with `root` = `{root}`" if root else ""
        )

    @server.prompt(title="Resume an audit")
    def resume_audit(root: p.PromptRoot = "") -> str:
        """Continue an interrupted audit: only the work still missing, then the report."""
        target = root or str(prompt_call(lambda: registry.get(None)).root)
        return render_prompt(
            "mcp/resume_audit.md", root=target, root_argument=f" with `root` = `{root}`" if root else ""
        )

    @server.prompt(title="Show the audit report")
    def show_report(root: p.PromptRoot = "") -> str:
        """Present the audit report: work blocks, findings, coverage and gaps."""
        target = root or str(prompt_call(lambda: registry.get(None)).root)
        note = (
            (
                f" (the server reports on its current repository; call `audit_status` with `root` = `{root}` "
                "if it names another)"
            )
            if root
            else ""
        )
        return render_prompt("mcp/show_report.md", root=target, root_note=note)

    register_operator_tools(server, registry)
    register_evidence_tools(server, registry, channels)
    if page_security is not None:
        install_page(server, current, page_security)
    return server
