"""The MCP tools a host uses beside the loop: ``validate_results``, ``explain_task``, ``requeue``.

Registered on the server by ``server.build_server``; errors a caller must act on become ``ToolError``.
"""

from __future__ import annotations

from typing import Annotated, Protocol, TypeVar

from mcp.server import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from audit_mcp.core.models import Receipt
from audit_mcp.core.operations import RequeueResult, TaskExplanation
from audit_mcp.surfaces import params as p
from audit_mcp.surfaces.edges import tool_call
from audit_mcp.usecases.service import AuditService

T = TypeVar("T")

TaskId = Annotated[
    str, Field(description="A task id (e.g. T00012), as dispatch plans and the report's gaps list them.")
]
Reason = Annotated[
    str, Field(description="Why the work goes back: what the next review should look at. Its packet prompt shows it.")
]
Files = Annotated[
    list[str] | None, Field(description="Repo-relative files, or gitignore-style globs such as 'app/**'.")
]
Lenses = Annotated[
    list[str] | None, Field(description="Lenses: alone, every file under them; with files, those files under them.")
]
Tasks = Annotated[list[str] | None, Field(description="Task ids (e.g. T00012).")]
Findings = Annotated[
    list[str] | None,
    Field(description="Findings by report id (F003) or fingerprint: their lines, under the lenses that reported them."),
]


class Services(Protocol):
    """How the server finds the service of a root, or of a run."""

    def get(self, root: str | None) -> AuditService: ...

    def for_run(self, run_id: str) -> AuditService: ...


def register_operator_tools(server: MCPServer, services: Services) -> None:
    @server.tool(
        title="Check results without submitting",
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )
    def validate_results(
        run_id: p.RunId, packet_id: p.PacketId, results: p.ResultsToCheck, usage: p.UsageToCheck = None
    ) -> Receipt:
        """Dry-run submit_packet: the receipt it would give now (`dry_run: true`), nothing recorded."""
        return tool_call(lambda: services.for_run(run_id).validate_results(run_id, packet_id, results, usage))

    @server.tool(
        title="Explain a task",
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )
    def explain_task(task_id: TaskId, root: p.Root = None) -> TaskExplanation:
        """Everything known about one task (a file or chunk under one lens): state, attempts, the packets
        that held it and their answers, failures, findings, requeues, and in `why` why it is open or closed.
        """
        return tool_call(lambda: services.get(root).explain_task(task_id))

    @server.tool(
        title="Requeue for review",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    def requeue(
        reason: Reason,
        files: Files = None,
        lenses: Lenses = None,
        tasks: Tasks = None,
        findings: Findings = None,
        root: p.Root = None,
    ) -> RequeueResult:
        """Send work back to review in the next run, with a reason its packet prompt shows: `files` (paths
        or globs), `lenses`, `tasks` or `findings`. Findings reported are kept; tasks out in the open run are
        left alone (`not_requeued`). Then call next_step.
        """
        return tool_call(
            lambda: services.get(root).requeue(
                reason, files=files or [], lenses=lenses or [], tasks=tasks or [], findings=findings or []
            )
        )
