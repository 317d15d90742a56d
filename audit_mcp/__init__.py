"""audit-mcp: a complete, provable code audit of a repository, run through the agent that calls it."""

from __future__ import annotations

__version__ = "0.1.0"

from audit_mcp.errors import AuditError, ConfigError, NotFoundError, PathError, StateError
from audit_mcp.service import AuditService

__all__ = [
    "AuditError",
    "AuditService",
    "ConfigError",
    "NotFoundError",
    "PathError",
    "StateError",
    "__version__",
]
