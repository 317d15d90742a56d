"""Which audit of a shared store a checkout joins: the repository's identity, not its path.

Hosts check the same repository out at different paths, so a shared store knows it by its first
commit and its ``origin`` remote (without credentials, ``.git`` or the URL scheme), or by the audit
name the user gives (``--audit-name``), which wins. A checkout without git history needs the name.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from audit_mcp.core.errors import ConfigError
from audit_mcp.engine.git import GitReader
from audit_mcp.store.identity import RepoIdentity

_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")


def repo_identity(root: Path, audit_name: str | None) -> RepoIdentity:
    if audit_name:
        return RepoIdentity(f"name:{audit_name.strip()}", f"audit name {audit_name.strip()!r}")
    git = GitReader(root)
    first = git.run("rev-list", "--max-parents=0", "HEAD")
    if first is None or first.returncode != 0 or not first.stdout.strip():
        raise ConfigError(
            f"{root} has no git history, so a shared store cannot tell which audit it belongs to; name the audit "
            "with --audit-name NAME (or AUDIT_MCP_AUDIT_NAME), the same on every host"
        )
    commit = sorted(first.stdout.decode("ascii", errors="replace").split())[0]
    remote = git.run("remote", "get-url", "origin")
    where = (
        normalize_remote(remote.stdout.decode("utf-8", errors="replace")) if remote and remote.returncode == 0 else ""
    )
    label = f"{where or 'no origin remote'}, first commit {commit[:12]}"
    return RepoIdentity(f"git:{commit}|{where}", label)


def normalize_remote(url: str) -> str:
    """``host/path`` of a remote URL: ``git@github.com:a/b.git`` and ``https://u:p@github.com/a/b`` agree."""
    text = url.strip()
    if (scp := _SCP.match(text)) and "://" not in text:
        host, path = scp.group(1), scp.group(2)
    else:
        parts = urlsplit(text)
        host, path = (parts.hostname or ""), parts.path
    path = path.strip("/")
    path = path.removesuffix(".git")
    return f"{host.lower()}/{path}" if host else path
