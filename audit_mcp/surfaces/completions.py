"""Completions for prompt and resource-template arguments: ``root``, ``run_id``, ``packet_id``, ``task_id``.

One handler serves every prompt and template, by the argument's name, so a template or prompt that takes
one of these ids later is completed too. A ``run_id`` already given (in the URI's other arguments) narrows
the packet ids to that run's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio.to_thread
from mcp.server import MCPServer
from mcp.types import Completion, CompletionArgument, CompletionContext, PromptReference, ResourceTemplateReference

from audit_mcp.core.errors import AuditError
from audit_mcp.usecases.completing import KINDS, MAX_VALUES
from audit_mcp.usecases.service import AuditService


def install_completions(
    server: MCPServer,
    service_for: Callable[[str | None], AuditService],
    roots: Callable[[], list[str]],
) -> None:
    """Register the completion handler; ``service_for(run_id)`` is the service that holds a run (or the current
    one for None), ``roots()`` the repositories this server serves."""

    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        given = dict(context.arguments or {}) if context is not None else {}
        if argument.name == "root":
            values = [r for r in roots() if r.startswith(argument.value)]
            return Completion(values=values[:MAX_VALUES], total=len(values), has_more=len(values) > MAX_VALUES)
        if argument.name not in KINDS:
            return None
        run_id = given.get("run_id") or None

        def lookup() -> tuple[list[str], bool]:
            try:
                return service_for(run_id).complete(argument.name, argument.value, run_id)
            except AuditError:
                return [], False  # no audit (or an unreadable one) has nothing to complete

        values, more = await anyio.to_thread.run_sync(lookup)
        return Completion(values=values, has_more=more)

    # The SDK's decorator is untyped; registering through it keeps ``complete`` typed.
    register: Callable[[Callable[..., Any]], Any] = server.completion()  # type: ignore[no-untyped-call]
    register(complete)
