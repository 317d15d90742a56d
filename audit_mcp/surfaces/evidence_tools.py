"""The MCP tool and prompt for runtime evidence: ``runtime_evidence`` attaches what running the code showed to
a finding, and the ``reproduce_finding`` prompt says how to check a finding safely and attach the result.

Registered on the server by ``server.build_server``; errors a caller must act on become ``ToolError``.
"""

from __future__ import annotations

from typing import TypeVar

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import ToolAnnotations

from audit_mcp.core.executable import command_line
from audit_mcp.core.models import EvidenceReceipt
from audit_mcp.surfaces import params as p
from audit_mcp.surfaces.channels import STATE_URIS, SessionChannels
from audit_mcp.surfaces.edges import prompt_call, tool_call
from audit_mcp.surfaces.operator_tools import Services

T = TypeVar("T")


def register_evidence_tools(server: MCPServer, registry: Services, channels: SessionChannels) -> None:
    @server.tool(
        title="Attach runtime evidence",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
    )
    async def runtime_evidence(
        ctx: Context,
        finding: p.FindingRef,
        verdict: p.EvidenceVerdict,
        output: p.EvidenceOutput,
        command: p.EvidenceCommand = None,
        kind: p.EvidenceKind = "reproduction",
        root: p.Root = None,
    ) -> EvidenceReceipt:
        """Attach evidence from running the code to a finding (a reproduction, a failing test, a crash log):
        stored as untrusted text, shown in the report; it moves the finding's status. See reproduce_finding."""
        service = tool_call(lambda: registry.get(root))
        receipt = await anyio.to_thread.run_sync(
            lambda: tool_call(
                lambda: service.runtime_evidence(finding, verdict, output, command=command, kind=kind, added_by="mcp")
            )
        )
        await channels.changed(ctx, STATE_URIS)
        return receipt

    @server.prompt(title="Check a finding by running the code")
    def reproduce_finding(finding: p.PromptFinding, root: p.PromptRoot = "") -> str:
        """How to check one finding by running the code safely, and how to attach what it showed."""
        service = prompt_call(lambda: registry.get(root or None))
        cli = command_line("runtime-evidence", "--root", str(service.root), "--finding", finding.strip())
        return prompt_call(lambda: service.runtime_instructions(finding, cli))
