"""Errors raised by the audit engine.

Every error derives from ``AuditError`` and carries a message written for the
person or agent who has to act on it: what went wrong and what to do next.
The surfaces translate them at the edge (``ToolError`` over MCP, a message on
stderr and a non-zero exit code in the CLI)::

    AuditError
    ├── ConfigError        the session config or an argument is wrong
    │   └── InputError     a value sent in (results, failures, a JSON file) is refused; nothing changed
    ├── PathError          a path escapes the repository root or is unusable
    ├── NotFoundError      an unknown run, packet, resource or audit
    └── StateError         the request does not fit the audit's current state
"""

from __future__ import annotations


class AuditError(Exception):
    """Base of every error the engine raises on purpose."""


class ConfigError(AuditError):
    """The session config or a tool argument is invalid."""


class InputError(ConfigError):
    """Input that was checked and refused before anything changed: each problem is (location, message),
    the location a JSON pointer into what was sent."""

    def __init__(self, problems: list[tuple[str, str]], next_action: str) -> None:
        self.problems = problems
        self.next_action = next_action
        super().__init__("; ".join(f"{loc}: {msg}" for loc, msg in problems) + f". {next_action}")


class PathError(AuditError):
    """A path escapes the repository root or cannot be used."""


class NotFoundError(AuditError):
    """A run, packet, audit or resource does not exist."""


class StateError(AuditError):
    """The request does not fit the audit's current state."""
