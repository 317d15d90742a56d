"""Errors raised by the audit engine.

Every error derives from ``AuditError`` and carries a message written for the
person or agent who has to act on it: what went wrong and what to do next.
The surfaces translate them at the edge (``ToolError`` over MCP, a message on
stderr and a non-zero exit code in the CLI)::

    AuditError
    ├── ConfigError        the session config or an argument is wrong
    ├── PathError          a path escapes the repository root or is unusable
    ├── NotFoundError      an unknown run, packet, resource or audit
    └── StateError         the request does not fit the audit's current state
"""

from __future__ import annotations


class AuditError(Exception):
    """Base of every error the engine raises on purpose."""


class ConfigError(AuditError):
    """The session config or a tool argument is invalid."""


class PathError(AuditError):
    """A path escapes the repository root or cannot be used."""


class NotFoundError(AuditError):
    """A run, packet, audit or resource does not exist."""


class StateError(AuditError):
    """The request does not fit the audit's current state."""
