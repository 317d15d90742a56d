"""The use cases behind every surface: next_step, submit_packet, merge_and_ingest, quota, status, report.

The MCP server and the CLI both call ``AuditService``; neither holds logic of
its own. One service serves one repository root and its artifacts directory.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from audit_mcp.core.config import AnalyzersConfig, SessionConfig, load_config
from audit_mcp.core.errors import AuditError, ConfigError, NotFoundError, PathError
from audit_mcp.core.fs import DerivedWriter, resolve_inside, write_atomic
from audit_mcp.core.models import (
    HostCapabilities,
    MergeSummary,
    Problem,
    QuotaStatus,
    Receipt,
    StatusView,
    Step,
)
from audit_mcp.core.progress import Progress, tell
from audit_mcp.core.text import capped, clean_text, id_problem
from audit_mcp.engine import drift, hosts
from audit_mcp.engine.batching import head_of_queue
from audit_mcp.engine.coverage import CellState, build_matrix, completeness, totals
from audit_mcp.engine.dispatch import (
    TIER_ORDER,
    PacketSpec,
    dispatch_plan,
    estimate_tokens,
    packet_prompt_prefix,
    render_packet_prompt,
)
from audit_mcp.engine.incremental import carry_forward, copy_findings
from audit_mcp.engine.ingest import ingest_run
from audit_mcp.engine.intake import build_manifest
from audit_mcp.engine.lenses import resolve_lenses
from audit_mcp.engine.packets import pack
from audit_mcp.engine.planner import Decision, Executor, Obligation, PlannerState, decide
from audit_mcp.engine.steps import StepContext, render_step
from audit_mcp.engine.validation import MAX_PAYLOAD_CHARS, PacketValidator
from audit_mcp.findings.analyzers import run_analyzers
from audit_mcp.findings.comparison import compare
from audit_mcp.findings.leads import import_leads, lead_report, leads_in
from audit_mcp.findings.report import ReportInput, render_json, render_markdown
from audit_mcp.findings.sarif import render_sarif
from audit_mcp.findings.synthesis import synthesize
from audit_mcp.scheduling.failures import classify, cooldown_until
from audit_mcp.scheduling.learned import LearnedStore, state_key
from audit_mcp.scheduling.leases import expired_failures, lease_end, superseded_message
from audit_mcp.scheduling.limits import ResolvedLimits, resolve_limits
from audit_mcp.scheduling.pacing import Pacing, iso, pacing_settings, run_outcome, schedule_view, with_observed
from audit_mcp.scheduling.scheduler import Learned, PacketLoad, RunOutcome, learn, packet_token_budget, schedule
from audit_mcp.store.tx import AuditRow, FileRow, PacketRow, RunRow, Store, Tx
from audit_mcp.usecases.views import quota_view, status_view

ARTIFACTS_DIRNAME = ".audit-mcp"
_WORK = {
    Obligation.INTAKE: "intake: listing, reading and hashing the repository's files",
    Obligation.PLAN: "plan: building the coverage matrix of files and lenses",
    Obligation.DISPATCH: "dispatch: packing review packets and writing their prompts",
    Obligation.INGEST: "ingest: merging the finished run into the coverage matrix",
    Obligation.SYNTHESIZE: "synthesize: deduplicating findings and writing the report",
}
MAX_REQUEUED_LISTED = 50

Clock = Callable[[], datetime]


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class AuditService:
    """One repository's audit: the engine behind the MCP tools and the CLI verbs."""

    def __init__(
        self,
        root: Path,
        artifacts_dir: Path | None = None,
        *,
        config_path: Path | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.root = Path(root).expanduser().resolve()
        if not self.root.is_dir():
            raise ConfigError(f"the repository root {self.root} is not a directory; pass an existing folder")
        self.artifacts_dir = Path(artifacts_dir).expanduser().resolve() if artifacts_dir else (
            self.root / ARTIFACTS_DIRNAME
        )
        if self.artifacts_dir == self.root:
            raise ConfigError("the artifacts directory cannot be the repository root; pick a subfolder")
        self.config_path = config_path
        self._clock: Clock = clock or (lambda: datetime.now(UTC))
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)
        ignore = self.artifacts_dir / ".gitignore"
        if not ignore.exists():
            write_atomic(ignore, "# audit-mcp's working files; never audited, never committed.\n*\n")
        self.store = Store(self.artifacts_dir)
        self.learned = LearnedStore()
        self.probe_transport: httpx.BaseTransport | None = None  # a seam for tests of the provider probe

    # paths ---------------------------------------------------------------------
    def now(self) -> str:
        return _iso(self._clock())

    def clock(self) -> datetime:
        return self._clock()

    @property
    def step_json_path(self) -> Path:
        return self.artifacts_dir / "steps" / "current-step.json"

    @property
    def step_prompt_path(self) -> Path:
        return self.artifacts_dir / "steps" / "current-prompt.md"

    @property
    def report_md_path(self) -> Path:
        return self.artifacts_dir / "report" / "report.md"

    @property
    def report_json_path(self) -> Path:
        return self.artifacts_dir / "report" / "report.json"

    @property
    def report_sarif_path(self) -> Path:
        return self.artifacts_dir / "report" / "report.sarif"

    def run_dir(self, run_id: str) -> Path:
        return self.artifacts_dir / "runs" / run_id

    def plan_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / "dispatch-plan.json"

    def packet_prompt_path(self, run_id: str, packet_id: str) -> Path:
        return self.run_dir(run_id) / "packets" / f"{packet_id}.md"

    def config(self) -> SessionConfig:
        return load_config(self.root, self.config_path)

    # next_step -------------------------------------------------------------------
    def next_step(
        self,
        capabilities: Mapping[str, Any] | None = None,
        *,
        client_name: str | None = None,
        new_audit: bool = False,
        retry_blocked: bool = False,
        progress: Progress | None = None,
        analyzer_sarif: Sequence[Path] = (),
        since: str | None = None,
    ) -> Step:
        """Run every inline obligation, then return the one Step that needs the agent.

        ``analyzer_sarif`` adds SARIF files to the config's ``analyzers.sarif``; they are read when an
        audit starts. ``since`` overrides the config's git ref for an audit that starts in this call
        (intake reads it).
        """
        arguments = dict(capabilities or {})
        try:
            config = self.config()
            if analyzer_sarif:
                # Paths from the command line are relative to the caller's directory; make them absolute.
                sarif = [*config.analyzers.sarif, *(str(Path(p).resolve()) for p in analyzer_sarif)]
                config = config.model_copy(update={"analyzers": AnalyzersConfig(sarif=sarif)})
            if since:
                config = config.model_copy(update={"since": since})
            lenses = resolve_lenses(config)
        except ConfigError as exc:
            return self._write_step(self._blocked(str(exc), hosts.resolve(arguments, {}, SessionConfig().host,
                                                                           client_name)))
        with self.store.write() as tx:
            audit = tx.current_audit()
            if analyzer_sarif and audit is not None and not new_audit:
                raise ConfigError("analyzer SARIF files are read when an audit starts; pass them on the first "
                                  "next-step, or with --new-audit to start a new audit")
            if audit is not None and (new_audit or retry_blocked):
                if new_audit and audit.synthesized_at is None and tx.cells(audit.audit_id, [CellState.ASSIGNED]):
                    raise ConfigError("an audit is still in flight; finish it (or merge its run) before starting "
                                      "a new one")
                if retry_blocked and audit.blocker:
                    tx.set_blocker(audit.audit_id, None)
                    tx.log(now=self.now(), audit_id=audit.audit_id, actor="host", action="retry_blocked",
                           detail=audit.blocker, outcome="blocker cleared")
            remembered = audit.host_caps if audit is not None else {}
            if audit is not None:
                tx.set_host_caps(audit.audit_id, hosts.remember(arguments, remembered))
        start_fresh = new_audit
        history: list[tuple[Obligation, tuple[object, ...]]] = []
        while True:
            with self.store.read() as tx:
                audit = tx.current_audit()
                remembered = hosts.remember(arguments, audit.host_caps if audit else {})
                caps = hosts.resolve(arguments, remembered, config.host, client_name)
                state = self._planner_state(tx, audit, config, caps, fresh=start_fresh)
            decision = decide(state, tuple(history))
            if decision.executor is Executor.AGENT:
                step = self._write_step(self._agent_step(decision, caps, config, state))
                tell(progress, len(history) + 1, None, f"ready: {step.step_kind}")
                return step
            history.append((decision.obligation, state.digest()))
            tell(progress, len(history), None, _WORK.get(decision.obligation, decision.obligation.value))
            try:
                self._run_inline(decision, config, caps, [lens.lens_id for lens in lenses], arguments)
            except AuditError as exc:
                return self._write_step(self._blocked(str(exc), caps))
            if decision.obligation is Obligation.INTAKE:
                start_fresh = False

    def _planner_state(
        self, tx: Tx, audit: AuditRow | None, config: SessionConfig, caps: HostCapabilities, *, fresh: bool
    ) -> PlannerState:
        if audit is None or fresh:
            return PlannerState(False, False, None, None, 0, 0, 0, 0, 0, config.max_runs,
                                caps.can_dispatch_subagents, False)
        counts = tx.cell_counts(audit.audit_id)
        runs = tx.runs(audit.audit_id, plan=False)
        open_run = next((r for r in runs if r.state == "open"), None)
        packets = tx.packets(open_run.run_id) if open_run else []
        submitted = len(tx.submitted_packet_ids(open_run.run_id)) if open_run else 0
        return PlannerState(
            has_audit=True,
            # With nothing in scope there is nothing to plan: the matrix is empty by design.
            has_cells=bool(counts) or not tx.file_counts(audit.audit_id).get("review", 0),
            blocker=audit.blocker,
            open_run_id=open_run.run_id if open_run else None,
            open_run_packets=len(packets),
            open_run_submitted=submitted,
            pending_cells=counts.get(CellState.PENDING, 0),
            assigned_cells=counts.get(CellState.ASSIGNED, 0),
            runs_started=len(runs),
            max_runs=config.max_runs,
            host_can_dispatch=caps.can_dispatch_subagents,
            synthesized=audit.synthesized_at is not None,
            open_run_expired=len(tx.expired_packet_ids(open_run.run_id, self.now())) if open_run else 0,
        )

    def _run_inline(
        self,
        decision: Decision,
        config: SessionConfig,
        caps: HostCapabilities,
        lenses: list[str],
        arguments: Mapping[str, Any],
    ) -> None:
        match decision.obligation:
            case Obligation.INTAKE:
                self._intake(config, lenses, arguments)
            case Obligation.PLAN:
                self._plan(config)
            case Obligation.DISPATCH:
                self._dispatch(config, caps)
            case Obligation.INGEST:
                with self.store.read() as tx:
                    audit = tx.current_audit()
                    run = next(r for r in tx.runs(audit.audit_id, plan=False) if r.state == "open") if audit else None
                    expired = expired_failures(tx, run.run_id, self.now(), config.lease_seconds) if run else []
                if run is not None:
                    self.merge_and_ingest(run.run_id, expired, actor="engine")
            case Obligation.SYNTHESIZE:
                self._synthesize()
            case _:
                raise AssertionError(f"{decision.obligation} is not an inline obligation")

    # inline obligations ------------------------------------------------------------
    def _intake(self, config: SessionConfig, lenses: list[str], arguments: Mapping[str, Any]) -> None:
        manifest = build_manifest(self.root, self.artifacts_dir, config)
        in_scope = {f.path for f in manifest.in_scope}
        ran = run_analyzers(config.analyzers.run, self.root, self.artifacts_dir / "analyzers")
        sources = [self.root / p for p in config.analyzers.sarif] + [r.sarif for r in ran if r.sarif is not None]
        imported = import_leads(sources, self.root, in_scope.__contains__)
        now = self.now()
        with self.store.write() as tx:
            previous = tx.current_audit()
            audit_id = tx.create_audit(
                now=now, root=str(self.root), git_head=manifest.git_head, git_dirty=manifest.git_dirty,
                digest=manifest.digest, lenses=lenses,
            )
            tx.set_host_caps(audit_id, hosts.remember(arguments, previous.host_caps if previous else {}))
            tx.insert_files(audit_id, manifest.files)
            tx.insert_edges(audit_id, manifest.edges)
            tx.insert_leads(audit_id, imported.leads)
            tx.log(
                now=now, audit_id=audit_id, actor="engine", action="intake",
                detail=f"{len(manifest.in_scope)} file(s) in scope, {len(manifest.files) - len(manifest.in_scope)} "
                       f"skipped, {len(manifest.edges)} import edge(s), listed by {manifest.source}"
                       + (f"; {len(imported.leads)} analyzer lead(s) imported" if sources else "")
                       + "".join(f"; {r.note}" for r in ran)
                       + "".join(f", {n} dropped ({why})" for why, n in sorted(imported.dropped.items())),
                outcome="ok",
            )

    def _plan(self, config: SessionConfig) -> None:
        now = self.now()
        with self.store.write() as tx:
            audit = self._require_audit(tx)
            count = tx.insert_matrix(audit.audit_id, build_matrix(tx.files(audit.audit_id), config), now)
            carried, previous = carry_forward(tx, audit.audit_id, now, enabled=config.carry_forward)
            kept = copy_findings(tx, audit.audit_id, previous, carried) if previous is not None else 0
            tx.log(now=now, audit_id=audit.audit_id, actor="engine", action="plan",
                   detail=f"{count} cell(s) over lenses {', '.join(audit.lenses)}"
                          + (f"; {len(carried)} carried forward from audit {previous} with {kept} finding(s), "
                             "content unchanged" if carried else ""), outcome="ok")

    def limits(self, config: SessionConfig, model: str | None, provider: str | None = None) -> ResolvedLimits:
        return resolve_limits(model, provider, config.model)

    def pacing(
        self, config: SessionConfig, caps: HostCapabilities, provider: str | None = None
    ) -> tuple[ResolvedLimits, Learned, str, Pacing]:
        """Limits (with any seen in real headers), learned state and its key, and the scheduler's settings."""
        pacing = pacing_settings(config.scheduler, caps.client_name)
        base = self.limits(config, caps.model, provider)
        key = state_key(base.provider, base.model)
        learned = self.learned.get(key)
        return with_observed(base, learned), learned, key, pacing

    def _dispatch(self, config: SessionConfig, caps: HostCapabilities) -> None:
        limits, learned, key, pacing = self.pacing(config, caps)
        budget = packet_token_budget(limits, learned, config.max_packet_tokens, caps.max_active_subagents)
        prefix = packet_prompt_prefix(resolve_lenses(config))
        now = self.now()
        with self.store.write() as tx:
            audit = self._require_audit(tx)
            files = {f.path: f for f in tx.files(audit.audit_id)}
            edges = tx.edges(audit.audit_id)
            judged = {v.lead_id for v in tx.verdicts(audit.audit_id)}
            open_leads = [x for x in tx.leads(audit.audit_id) if x.lead_id not in judged]
            single = not caps.can_dispatch_subagents
            prefix_tokens = estimate_tokens(prefix)
            queue = tx.iter_cells(audit.audit_id, CellState.PENDING)
            pending = head_of_queue(queue, files, packets=1 if single else config.max_packets_per_run,
                                    room=max(1, budget - prefix_tokens))
            queue.close()
            plans = pack(pending, files, edges, budget=budget, prefix_tokens=prefix_tokens)
            # A run stays small enough for the host to read its step; the rest waits for the next run.
            plans = plans[:1] if single else plans[:config.max_packets_per_run]
            seq = len(tx.runs(audit.audit_id, plan=False)) + 1
            run_id = f"A{audit.audit_id}-R{seq}"
            specs = []
            for n, plan in enumerate(plans, 1):
                packet_id = f"{run_id}-P{n:02d}"
                specs.append(PacketSpec(packet_id, plan, self.packet_prompt_path(run_id, packet_id)))
            planned = schedule(limits, learned, caps.max_active_subagents, pacing.wave_kind,
                               [PacketLoad(s.packet_id, s.plan.estimated_tokens, TIER_ORDER[s.plan.tier])
                                for s in specs], self._clock(), half_life=pacing.half_life,
                               max_packet_tokens=config.max_packet_tokens)
            cooldown = max(filter(None, (self.cooldown(tx, audit.audit_id), iso(planned.cooldown_until))),
                           default=None)
            plan_doc = dispatch_plan(
                run_id=run_id, kind="single" if single else "dispatch", specs=specs,
                wave_cap=planned.wave_size, cooldown_until=cooldown, order=planned.order,
                schedule=schedule_view(planned, pacing, key),
                launch_offsets=dict(zip(planned.order, planned.launch_offsets, strict=True)),
            )
            plan_doc["lease_expires_at"] = _iso(lease_end(self._clock(), config.lease_seconds))
            tx.insert_run(RunRow(run_id, audit.audit_id, seq, "single" if single else "dispatch", "open", now,
                                 None, plan_doc["wave_size"], plan_doc))
            # Prompts are written before the commit that makes their packets visible; a crash before it
            # leaves orphan files the next dispatch overwrites, so no temporary file or fsync per prompt.
            with DerivedWriter() as prompts:
                for n, spec in enumerate(specs, 1):
                    carried = leads_in(open_leads, [(u.path, u.start_line, u.end_line) for u in spec.plan.units])
                    prompts.write(spec.prompt_path, render_packet_prompt(
                        prefix=prefix, run_id=run_id, packet_id=spec.packet_id, plan=spec.plan, files=files,
                        edges=edges, root=self.root, artifacts_dir=self.artifacts_dir, leads=carried,
                    ))
                    tx.insert_packet(
                        audit.audit_id,
                        PacketRow(spec.packet_id, run_id, n, "issued", spec.plan.estimated_tokens, spec.plan.tier,
                                  spec.plan.tier_reason, str(spec.prompt_path)),
                        [c.task_id for c in spec.plan.cells],
                    )
                    tx.assign_leads(spec.packet_id, [x.lead_id for x in carried])
                    tx.assign_cells(audit.audit_id, run_id, spec.packet_id, spec.plan.cells, now)
            tx.lease_packets(run_id, plan_doc["lease_expires_at"])
            # Indented for people when small; compact (and fast to write) on large repositories.
            indent = 2 if len(specs) <= 100 else None
            write_atomic(self.plan_path(run_id), json.dumps(plan_doc, indent=indent) + "\n")
            tx.log(now=now, audit_id=audit.audit_id, actor="engine", action="dispatch",
                   detail=f"run {run_id}: {len(specs)} packet(s), waves {plan_doc['waves']}", outcome="ok")

    def _learn(self, run: RunRow, taught: RunOutcome, half_life: timedelta) -> None:
        """Fold a merged run's outcome into the learned state of the model it was scheduled for."""
        planned = run.plan.get("schedule") or {}
        key = planned.get("state_key")
        if not key:
            return
        prior = float(planned.get("physical_cap") or run.wave_size or 1)
        now = self._clock()
        self.learned.update(key, lambda state: learn(state, taught, now, prior, half_life), now)

    def cooldown(self, tx: Tx, audit_id: int) -> str | None:
        """The end of the latest rate-limit cooldown, when it is still in the future."""
        latest = None
        for failure in tx.failures(audit_id):
            if failure["kind"] != "rate_limited":
                continue
            at = datetime.fromisoformat(failure["at"].replace("Z", "+00:00"))
            until = cooldown_until(at, classify(failure["detail"]).retry_after_seconds)
            latest = until if latest is None or until > latest else latest
        if latest is None or latest <= self._clock():
            return None
        return _iso(latest)

    def _synthesize(self) -> None:
        with self.store.read() as tx:
            audit = self._require_audit(tx)
            files = tx.files(audit.audit_id)
        config = self.config()
        changed = drift.detect(self.root, config, files)
        if changed:
            with self.store.write() as tx:
                requeued = drift.apply(tx, audit.audit_id, config, changed, self.now())
            if requeued:
                return  # the changed files go back to review before any report is written
        report = self.build_report_input()
        write_atomic(self.report_md_path, render_markdown(report))
        write_atomic(self.report_json_path, json.dumps(render_json(report), indent=2) + "\n")
        write_atomic(self.report_sarif_path, json.dumps(render_sarif(report), indent=2) + "\n")
        now = self.now()
        with self.store.write() as tx:
            audit = self._require_audit(tx)
            tx.set_synthesized(audit.audit_id, now)
            tx.log(now=now, audit_id=audit.audit_id, actor="engine", action="synthesize",
                   detail=f"{len(report.synthesis.findings)} finding(s), completeness {report.completeness}",
                   outcome="ok")

    # steps -------------------------------------------------------------------------
    def _blocked(self, reason: str, caps: HostCapabilities) -> StepContext:
        return StepContext(kind="blocked", status="blocked", run_id=None, reason=reason, caps=caps,
                           root=self.root, artifacts_dir=self.artifacts_dir)

    def _agent_step(
        self, decision: Decision, caps: HostCapabilities, config: SessionConfig, state: PlannerState
    ) -> StepContext:
        ctx = StepContext(kind="blocked", status="blocked", run_id=state.open_run_id, reason=decision.reason,
                          caps=caps, root=self.root, artifacts_dir=self.artifacts_dir)
        with self.store.read() as tx:
            audit = tx.current_audit()
            if audit is not None:
                counts = tx.cell_counts(audit.audit_id)
                ctx.coverage = totals(counts)
                ctx.completeness = completeness(counts)
            if decision.obligation is Obligation.CAPABILITY_CHECK:
                ctx.kind, ctx.status = "capability_check", "ready"
            elif decision.obligation is Obligation.REVIEW and state.open_run_id:
                run = tx.run(state.open_run_id)
                assert run is not None
                submitted = tx.submitted_packet_ids(run.run_id)
                ctx.kind = "single_task_fallback" if run.kind == "single" else "dispatch_review"
                ctx.status = "ready"
                ctx.plan = run.plan
                ctx.plan_path = self.plan_path(run.run_id)
                ctx.outstanding = [p for p in run.plan["packets"] if p["packet_id"] not in submitted]
                ctx.submitted = sorted(submitted)
            elif decision.obligation is Obligation.PRESENT_REPORT:
                ctx.kind, ctx.status = "present_report", "complete"
                ctx.report_path = self.report_md_path
        return ctx

    def _write_step(self, ctx: StepContext) -> Step:
        step, prompt = render_step(ctx, self.step_prompt_path)
        write_atomic(self.step_prompt_path, prompt)
        write_atomic(self.step_json_path, step.model_dump_json(indent=2) + "\n")
        return step

    # submit_packet -----------------------------------------------------------------
    def _refuse(self, run_id: str, packet_id: str, location: str, message: str) -> Receipt:
        return Receipt(accepted=False, run_id=run_id, packet_id=packet_id,
                       errors=[Problem(location=location, message=message)],
                       next_action="Fix the error above and submit again; nothing was recorded.")

    def submit_packet(self, run_id: str, packet_id: str, results: Any, usage: Any = None) -> Receipt:
        for name, value in (("run_id", run_id), ("packet_id", packet_id)):
            if problem := id_problem(name, value):
                return self._refuse(clean_text(str(run_id)), clean_text(str(packet_id)), f"/{name}", problem)
        if isinstance(results, str):
            if len(results) > MAX_PAYLOAD_CHARS:
                return self._refuse(run_id, packet_id, "/results",
                                    f"the results are {len(results)} characters; the limit is {MAX_PAYLOAD_CHARS}")
            try:
                results = json.loads(results)
            except json.JSONDecodeError as exc:
                return self._refuse(run_id, packet_id, "/results", f"results are not valid JSON: {exc}")
        elif len(json.dumps(results, default=str)) > MAX_PAYLOAD_CHARS:
            return self._refuse(run_id, packet_id, "/results",
                                f"the results are over {MAX_PAYLOAD_CHARS} characters; shorten texts and evidence")
        if isinstance(results, dict) and "results" in results:
            usage = usage if usage is not None else results.get("usage")
            results = results["results"]
        with self.store.read() as tx:
            run = tx.run(run_id, plan=False)
            if run is None:
                return self._refuse(run_id, packet_id, "/run_id", f"run {run_id!r} is unknown here; take run_id "
                                    "from the dispatch plan or the packet prompt you were given")
            packet = tx.packet(packet_id)
            if packet is None or packet.run_id != run_id:
                ids = ", ".join(p.packet_id for p in tx.packets(run_id))
                return self._refuse(run_id, packet_id, "/packet_id", f"packet {packet_id!r} is not in run "
                                    f"{run_id}; its packets are {ids}")
            if run.state != "open":
                return self._refuse(run_id, packet_id, "/run_id", superseded_message(tx, run, packet_id))
            task_ids = tx.packet_task_ids(packet_id)
            cells = list(tx.cells_by_id(run.audit_id, task_ids).values())
            previous = tx.submission(packet_id)
            leads = tx.leads(run.audit_id, packet_id)
        validator = PacketValidator(packet_id, cells, self._read_lines,
                                    lambda path: self._in_manifest(run.audit_id, path), leads)
        outcome = validator.validate(results, usage)
        warnings = [Problem(location=loc, message=msg)
                    for loc, msg in capped([(w.location, w.message) for w in outcome.warnings], "warnings")]
        if not outcome.accepted:
            return Receipt(
                accepted=False, run_id=run_id, packet_id=packet_id,
                errors=[Problem(location=loc, message=msg)
                        for loc, msg in capped([(e.location, e.message) for e in outcome.errors], "errors")],
                warnings=warnings,
                next_action="Nothing was recorded. Fix every error above and call submit_packet again with the "
                            "whole corrected results.",
            )
        payload = {"results": outcome.results, "usage": outcome.usage}
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        covered = sum(1 for r in outcome.results if r["status"] != "could_not_review")
        kept = sum(len(r["findings"]) for r in outcome.results)
        duplicate = previous is not None and previous[0] == digest
        if not duplicate:
            with self.store.write() as tx:
                run_now = tx.run(run_id, plan=False)
                if run_now is None or run_now.state != "open":
                    return self._refuse(run_id, packet_id, "/run_id",
                                        f"run {run_id} was merged while this submission was checked; call next_step")
                replaced = tx.submission(packet_id) is not None
                tx.put_submission(packet_id, run_id, digest, payload, self.now())
                tx.set_packet_state(packet_id, "submitted")
                tx.log(now=self.now(), audit_id=run_now.audit_id, actor="subagent", action="submit_packet",
                       detail=f"{packet_id}: {covered} task(s) covered, {kept} finding(s)"
                              f"{' (replaced an earlier submission)' if replaced else ''}", outcome="accepted")
            if replaced:
                warnings.append(Problem(location="/", message="this submission replaced the packet's earlier "
                                                              "accepted one"))
        return Receipt(
            accepted=True, run_id=run_id, packet_id=packet_id, duplicate=duplicate, warnings=warnings,
            tasks_covered=covered, tasks_open=len(outcome.results) - covered, findings_kept=kept,
            next_action="Accepted. Your packet is done; stop here." if not duplicate else
            "Already accepted with identical content; nothing changed. Your packet is done.",
        )

    def _in_manifest(self, audit_id: int, path: str) -> bool:
        with self.store.read() as tx:
            return tx.has_file(audit_id, path)

    def _read_lines(self, path: str) -> list[str] | None:
        try:
            target = resolve_inside(self.root, path)
            return target.read_bytes().decode("utf-8", errors="replace").splitlines()
        except (PathError, OSError):
            return None

    # merge_and_ingest ----------------------------------------------------------------
    def merge_and_ingest(
        self, run_id: str, failures: Sequence[Mapping[str, Any]] | None = None, *, actor: str = "host",
        progress: Progress | None = None,
    ) -> MergeSummary:
        reported: dict[str, str] = {}
        for i, item in enumerate(failures or []):
            if not isinstance(item, Mapping) or not isinstance(item.get("packet_id"), str):
                raise ConfigError(f"failures[{i}] must be an object with packet_id and error (the text the host "
                                  "saw)")
            text = item.get("error") or item.get("error_text") or item.get("message") or ""
            reported[item["packet_id"]] = clean_text(str(text)[:4000]) or "failed without an error text"
        if problem := id_problem("run_id", run_id):
            raise ConfigError(problem)
        config = self.config()
        half_life = pacing_settings(config.scheduler, None).half_life
        now = self.now()
        tell(progress, 1, 2, f"merging run {run_id} ({len(reported)} packet(s) reported failed)")
        changed = drift.detect(self.root, config, self._run_files(run_id))
        with self.store.write() as tx:
            run = tx.run(run_id)  # the whole plan: what the run was scheduled for
            if run is None:
                raise NotFoundError(f"run {run_id!r} is unknown; take run_id from the current step")
            audit = self._require_audit(tx)
            packets = tx.packets(run_id)
            unknown = sorted(set(reported) - {p.packet_id for p in packets})
            if unknown:
                raise ConfigError(f"failures name packet(s) {unknown} that are not in run {run_id}; its packets are "
                                  f"{', '.join(p.packet_id for p in packets)}")
            if run.state != "open":
                counts = tx.cell_counts(audit.audit_id)
                return MergeSummary(run_id=run_id, already_merged=True, packets_merged=0, packets_failed=0,
                                    tasks_covered=0, tasks_requeued=0, tasks_failed=0, requeued=[],
                                    coverage=totals(counts), completeness=completeness(counts),
                                    next_action="This run was already merged; nothing changed. Call next_step.")
            outcome = ingest_run(tx, audit.audit_id, run, packets, reported, config.max_attempts, now)
            usage = [(sub[1].get("usage") or {}, p.estimated_tokens) for p in packets
                     if (sub := tx.submission(p.packet_id)) is not None]
            taught = run_outcome(launched=len(packets), wave_size=run.wave_size, succeeded=outcome.merged,
                                 reported=reported, usage=usage, now=self._clock())
            if taught.hard_stop:
                tx.set_blocker(audit.audit_id, f"the model provider refused for a reason waiting cannot fix: "
                               f"{taught.hard_stop[:400]}. Raise the spend cap or wait for the usage window to "
                               "reset, then call next_step with retry_blocked=true.")
            tx.finish_run(run_id, now)
            outcome.requeued += drift.apply(tx, audit.audit_id, config, changed, now)
            counts = tx.cell_counts(audit.audit_id)
            tx.log(now=now, audit_id=audit.audit_id, actor=actor, action="merge_and_ingest",
                   detail=f"run {run_id}: {outcome.merged} merged, {outcome.failed} failed, {outcome.covered} "
                          f"task(s) covered, {len(outcome.requeued)} requeued", outcome="ok")
        self._learn(run, taught, half_life)
        still = [r for r in outcome.requeued if r.state == "pending"]
        tell(progress, 2, 2, f"merged run {run_id}: {outcome.covered} task(s) covered, {len(still)} requeued")
        return MergeSummary(
            run_id=run_id, packets_merged=outcome.merged, packets_failed=outcome.failed,
            tasks_covered=outcome.covered, tasks_requeued=len(still), tasks_failed=len(outcome.requeued) - len(still),
            requeued=outcome.requeued[:MAX_REQUEUED_LISTED], failure_kinds=outcome.kinds, coverage=totals(counts),
            completeness=completeness(counts),
            next_action="Call next_step now: it hands out what is still open, or writes the report.",
        )

    def _run_files(self, run_id: str) -> list[FileRow]:
        """The manifest rows of the files a run's packets cover."""
        with self.store.read() as tx:
            run = tx.run(run_id, plan=False)
            if run is None:
                return []
            task_ids = [t for p in tx.packets(run_id) for t in tx.packet_task_ids(p.packet_id)]
            paths = {c.path for c in tx.cells_by_id(run.audit_id, task_ids).values()}
            return [f for path in sorted(paths) if (f := tx.file(run.audit_id, path)) is not None]

    # reports and views ----------------------------------------------------------------
    def _require_audit(self, tx: Tx) -> AuditRow:
        audit = tx.current_audit()
        if audit is None:
            raise NotFoundError("no audit has started in this artifacts directory; call next_step first")
        return audit

    def build_report_input(self) -> ReportInput:
        with self.store.read() as tx:
            audit = self._require_audit(tx)
            counts = tx.cell_counts(audit.audit_id)
            cells = tx.cells(audit.audit_id)
            files = tx.files(audit.audit_id)
            raw = tx.findings(audit.audit_id)
            runs = tx.runs(audit.audit_id, plan=False)
            by_lens = tx.cell_counts_by_lens(audit.audit_id)
            baseline = tx.previous_audit(audit.audit_id)
            leads, verdicts = tx.leads(audit.audit_id), tx.verdicts(audit.audit_id)
            baseline_raw = tx.findings(baseline.audit_id) if baseline else []
        synthesis = synthesize(raw)
        comparison = None
        if baseline is not None:
            reviewed = {(c.path, c.lens) for c in cells if c.state in (CellState.REVIEWED, CellState.NOT_APPLICABLE)}
            comparison = compare(synthesis, synthesize(baseline_raw), baseline.audit_id, reviewed)
        changed = []
        for f in files:
            if f.scope != "review":
                continue
            try:
                data = resolve_inside(self.root, f.path).read_bytes()
            except (PathError, OSError):
                changed.append(f.path)
                continue
            if hashlib.sha256(data).hexdigest() != f.sha256:
                changed.append(f.path)
        return ReportInput(
            repo_name=self.root.name, root=str(self.root), audit_id=audit.audit_id, created_at=audit.created_at,
            generated_at=self.now(), git_head=audit.git_head, git_dirty=audit.git_dirty,
            manifest_digest=audit.manifest_digest, completeness=completeness(counts), lenses=audit.lenses,
            coverage_by_lens=by_lens, totals=totals(counts),
            gap_cells=[c for c in cells if c.state in (CellState.FAILED, CellState.SKIPPED)],
            skipped_files=[f for f in files if f.scope == "skipped"], changed_since_snapshot=changed,
            runs=len(runs), synthesis=synthesis, comparison=comparison,
            leads=lead_report(leads, verdicts, [(f.finding_id, f.file, f.start_line, f.end_line)
                                                for f in synthesis.findings]),
        )

    def report(self, fmt: str = "md") -> str:
        paths = {"md": self.report_md_path, "json": self.report_json_path, "sarif": self.report_sarif_path}
        if fmt not in paths:
            raise ConfigError(f"unknown report format {fmt!r}; use md, json or sarif")
        path = paths[fmt]
        with self.store.read() as tx:
            synthesized = self._require_audit(tx).synthesized_at is not None
        if synthesized and path.exists():
            return path.read_text(encoding="utf-8")
        # The audit is still running (or the file is gone): a provisional report from the current state.
        report = self.build_report_input()
        if fmt == "md":
            return render_markdown(report)
        doc = render_json(report) if fmt == "json" else render_sarif(report)
        return json.dumps(doc, indent=2) + "\n"

    def coverage(self) -> dict[str, Any]:
        with self.store.read() as tx:
            audit = self._require_audit(tx)
            counts = tx.cell_counts(audit.audit_id)
            return {"audit_id": audit.audit_id, "completeness": completeness(counts), "totals": totals(counts),
                    "by_lens": tx.cell_counts_by_lens(audit.audit_id),
                    "skipped_files": tx.file_counts(audit.audit_id).get("skipped", 0)}

    def quota(self, host_model: str | None = None, provider: str | None = None) -> QuotaStatus:
        return quota_view(self, host_model, provider)

    def status(self) -> StatusView:
        return status_view(self)
