"""audit-mcp: a complete, provable code audit of a repository, run through the agent that calls it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from audit_mcp.core.errors import AuditError, ConfigError, NotFoundError, PathError, StateError
from audit_mcp.core.version import __version__

if TYPE_CHECKING:
    from audit_mcp.usecases.service import AuditService

__all__ = [
    "AuditError",
    "AuditService",
    "ConfigError",
    "NotFoundError",
    "PathError",
    "StateError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # The service (every use case, and what they import) is loaded when it is first asked for, so a command
    # line verb loads only the modules it uses.
    if name == "AuditService":
        from audit_mcp.usecases.service import AuditService

        return AuditService
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
