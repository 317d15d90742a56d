"""audit-mcp: a complete, provable code audit of a repository, run through the agent that calls it."""

from __future__ import annotations

from audit_mcp.core.errors import AuditError, ConfigError, NotFoundError, PathError, StateError
from audit_mcp.core.version import __version__
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
