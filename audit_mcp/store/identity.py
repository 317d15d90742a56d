"""Which store a workspace uses, and which audit in it: the store URL and the repository's identity.

A URL of ``postgresql://`` (or ``postgres://``) names a shared PostgreSQL database; ``sqlite`` (or no
URL) the default, a SQLite file in the artifacts directory. In a shared store a repository is known by
its identity, not by where it is checked out: its first commit and its ``origin`` remote, or a name the
user gives, so every host's checkout of it finds the same audit.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from audit_mcp.core.errors import ConfigError

POSTGRES_SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True)
class RepoIdentity:
    """``key`` decides which audit a checkout joins; ``label`` says it for people."""

    key: str
    label: str


def store_kind(url: str | None) -> str:
    """``sqlite`` or ``postgresql`` for a store URL; anything else is refused with what is accepted."""
    if url is None or url.strip() in ("", "sqlite"):
        return "sqlite"
    scheme = urlsplit(url.strip()).scheme.lower()
    if scheme in POSTGRES_SCHEMES:
        return "postgresql"
    raise ConfigError(
        f"unknown store {redact(url)!r}: use 'sqlite' (the default, a file in the artifacts directory) or a "
        "PostgreSQL URL such as postgresql://user@host:5432/dbname"
    )


def redact(url: str) -> str:
    """The URL without its password, for messages and prompts (libpq reads it from PGPASSWORD or ~/.pgpass)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
