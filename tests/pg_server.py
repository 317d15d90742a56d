"""A throwaway PostgreSQL server for the tests: a fresh cluster in a temporary directory on a loopback port.

The machine's own binaries are used (``pg_config --bindir``, else the newest ``/usr/lib/postgresql/N/bin``;
``.ci/run`` installs the package when they are missing). ``initdb`` refuses to run as root, so as root the
server runs as the ``postgres`` user (or ``nobody``) through ``runuser``; the tests connect over TCP with
trust authentication. The data is throwaway, so fsync is off.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def pg_bindir() -> Path | None:
    """Where ``initdb`` and ``pg_ctl`` are, or ``None`` when this machine has no PostgreSQL server binaries."""
    override = os.environ.get("AUDIT_MCP_PG_BINDIR")
    if override:
        return Path(override)
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True, timeout=10)
        found = Path(out.stdout.strip())
        if (found / "initdb").exists():
            return found
    versions = [p for p in Path("/usr/lib/postgresql").glob("*/bin/initdb") if p.parts[-3].isdigit()]
    return max(versions, key=lambda p: int(p.parts[-3])).parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """``start()`` a cluster, hand out ``dsn()``s, ``stop()`` it and remove its files."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.user: str | None = None
        if os.geteuid() == 0:
            self.user = next(u for u in ("postgres", "nobody") if _has_user(u))
        # Not pytest's tmp_path: it is private to root, and the server's user must reach its data directory.
        self.base = Path(tempfile.mkdtemp(prefix="audit-mcp-pg-", dir="/tmp"))
        if self.user:
            entry = pwd.getpwnam(self.user)
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
        self.data = self.base / "data"
        self.port = 0

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        env = {**os.environ, "LC_ALL": "C.UTF-8", "TZ": "UTC"}
        return subprocess.run(command, cwd=self.base, check=check, capture_output=True, text=True, env=env)

    def start(self) -> PgServer:
        self._run(
            "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C.UTF-8",
            "--no-sync", "--no-instructions",
        )  # fmt: skip
        result = None
        for _ in range(5):  # a port free a moment ago can be taken before the server binds it
            self.port = _free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.base} -c max_connections=400"
                " -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
            )
            log = str(self.base / "server.log")
            result = self._run("pg_ctl", "-D", str(self.data), "-l", log, "-w", "-t", "60", "-o", options, "start",
                               check=False)  # fmt: skip
            if result.returncode == 0:
                return self
        log_text = (self.base / "server.log").read_text(errors="replace")
        raise RuntimeError(f"pg_ctl could not start a server: {result.stdout if result else ''}{log_text}")

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.base, ignore_errors=True)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
