"""Git as a reader, never an executor: the one place the audit runs git.

The repository under audit is hostile. Its ``.git/config``, ``.gitattributes`` and hooks can name programs
that plain ``git status`` or ``git diff`` would run on the auditor's machine: an fsmonitor hook, hooks,
a pager, an external diff, textconv, clean/smudge/process filters, credential helpers, lazy fetches
from a promisor remote. Every git call goes through ``GitReader``, which

- builds the environment from scratch: no inherited ``GIT_*`` variable, no system or global config
  (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL`` and ``HOME`` point at the null device), no terminal
  prompt, no optional locks (git writes nothing into ``.git``), no pager, editor or askpass;
- passes overrides as command-line config (``GIT_CONFIG_COUNT``, which wins over the repository's own):
  ``HARDENING`` below, plus an empty command for every filter and diff driver the repository's config
  defines, so no driver it names can run;
- gives diffs ``--no-ext-diff --no-textconv`` and never recurses into submodules;
- times out (``TIMEOUT_SECONDS``) instead of hanging.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from audit_mcp.core.errors import ConfigError
from audit_mcp.core.executable import find_program, trusted_path

TIMEOUT_SECONDS = 120.0
MAX_DRIVERS = 256  # filter and diff drivers neutralised one by one; a config naming more is refused

# (key, value): command-line config that wins over anything the repository's config says.
HARDENING: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", os.devnull),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("core.gitProxy", ""),
    ("core.untrackedCache", "false"),
    ("core.attributesFile", os.devnull),
    ("core.excludesFile", os.devnull),
    ("credential.helper", ""),
    ("diff.external", ""),
    ("diff.ignoreSubmodules", "all"),
    ("status.submoduleSummary", "false"),
    ("submodule.recurse", "false"),
    ("protocol.allow", "never"),
    ("log.showSignature", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("uploadpack.packObjectsHook", ""),
    ("color.ui", "false"),
)
_DRIVER_COMMANDS = {"filter": ("clean", "smudge", "process"), "diff": ("textconv", "command")}
_KEPT_ENV = ("PATH", "SYSTEMROOT", "TMPDIR", "TEMP", "TMP")

Runner = Callable[..., "subprocess.CompletedProcess[bytes]"]


def hardened_env(overrides: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The whole environment of a git call: nothing inherited that git reads, every override as config."""
    env = {k: os.environ[k] for k in _KEPT_ENV if k in os.environ}
    env.update(
        {
            "LC_ALL": "C",
            "HOME": os.devnull,
            "XDG_CONFIG_HOME": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_SYSTEM": os.devnull,
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_NO_LAZY_FETCH": "1",
            "GIT_PROTOCOL_FROM_USER": "0",
            "GIT_PAGER": "cat",
            "PAGER": "cat",
            "GIT_EDITOR": "true",
            "GIT_ASKPASS": "",
            "SSH_ASKPASS": "",
            "GIT_SSH_COMMAND": "false",
            "GIT_CONFIG_COUNT": str(len(overrides)),
        }
    )
    for i, (key, value) in enumerate(overrides):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def driver_overrides(config_listing: bytes) -> list[tuple[str, str]]:
    """Empty commands for every filter and diff driver named in ``git config -z --get-regexp`` output."""
    drivers: set[tuple[str, str]] = set()
    for entry in config_listing.split(b"\0"):
        key = entry.split(b"\n", 1)[0].decode("utf-8", errors="surrogateescape")
        section, _, rest = key.partition(".")
        name, dot, _variable = rest.rpartition(".")
        if section.lower() in _DRIVER_COMMANDS and dot:
            drivers.add((section.lower(), name))
    if len(drivers) > MAX_DRIVERS:
        raise ConfigError(
            f"the repository's git config defines {len(drivers)} filter or diff drivers; audit-mcp neutralises "
            f"at most {MAX_DRIVERS}. Remove the unused ones from .git/config, or audit a clean clone."
        )
    out = []
    for section, name in sorted(drivers):
        out += [(f"{section}.{name}.{command}", "") for command in _DRIVER_COMMANDS[section]]
        if section == "filter":
            out.append((f"filter.{name}.required", "false"))
    return out


class GitReader:
    """Read-only git for one repository root, under the hardened environment."""

    def __init__(self, root: Path, *, timeout: float = TIMEOUT_SECONDS, runner: Runner = subprocess.run) -> None:
        self.root = root
        self.timeout = timeout
        self._runner = runner
        self._overrides: list[tuple[str, str]] | None = None
        self._git: str | None = None

    def _exec(self, args: Sequence[str], overrides: Sequence[tuple[str, str]]) -> subprocess.CompletedProcess[bytes]:
        if self._git is None:
            # Never a git the repository ships: found on PATH without its empty, relative and in-root entries.
            self._git = find_program("git", self.root)
            if self._git is None:
                raise FileNotFoundError("git")
        env = hardened_env(overrides)
        env["PATH"] = trusted_path(self.root)
        return self._runner(
            [self._git, "--no-pager", "-C", str(self.root), *args],
            capture_output=True,
            check=False,
            stdin=subprocess.DEVNULL,
            timeout=self.timeout,
            env=env,
        )

    def overrides(self) -> list[tuple[str, str]]:
        """``HARDENING``, ``safe.directory`` for this root, and empty commands for the repository's drivers."""
        if self._overrides is None:
            base = [*HARDENING, ("safe.directory", str(self.root))]
            listing = self._exec(["config", "-z", "--get-regexp", r"^(filter|diff)\..*\."], base)
            # Exit code 1 means no such key; anything else (not a repository) leaves nothing to neutralise.
            self._overrides = base + (driver_overrides(listing.stdout) if listing.returncode == 0 else [])
        return self._overrides

    def run(self, *args: str) -> subprocess.CompletedProcess[bytes] | None:
        """git ``args`` in the root, or ``None`` when git is missing or did not finish in time."""
        try:
            return self._exec(args, self.overrides())
        except (FileNotFoundError, subprocess.TimeoutExpired):
            return None

    def require(self, what: str, *args: str) -> bytes:
        """git's stdout for ``args``; a ``ConfigError`` saying ``what`` could not be done otherwise."""
        proc = self.run(*args)
        if proc is None:
            raise ConfigError(f"cannot {what}: git is not installed or did not answer in {self.timeout:g} s")
        if proc.returncode != 0:
            raise ConfigError(f"cannot {what}: {proc.stderr.decode(errors='replace').strip()[:500]}")
        return proc.stdout

    def tracks_under(self, rel: str) -> bool:
        """Whether the index lists any file under ``rel`` (one git call; ``False`` outside a repository).
        Listing the index runs no driver the repository could name, so the base hardening is enough."""
        try:
            proc = self._exec(["ls-files", "-z", "--", rel], [*HARDENING, ("safe.directory", str(self.root))])
        except (FileNotFoundError, subprocess.TimeoutExpired):
            return False
        return proc.returncode == 0 and bool(proc.stdout.strip(b"\0"))

    def work_tree(self) -> Path | None:
        """The work tree git would use for the root, when it is the root or holds it; else ``None``.

        A repository whose config moves the work tree elsewhere (``core.worktree``) or that is bare is
        not trusted for listing: the caller walks the directory instead.
        """
        proc = self.run("rev-parse", "--is-inside-work-tree", "--show-toplevel")
        if proc is None or proc.returncode != 0:
            return None
        lines = proc.stdout.decode("utf-8", errors="surrogateescape").splitlines()
        if len(lines) < 2 or lines[0].strip() != "true":
            return None
        top = Path(lines[1].strip()).resolve()
        root = self.root.resolve()
        return top if top == root or top in root.parents else None


def paths_of(output: bytes) -> list[str]:
    """NUL-separated paths from git ``-z`` output, decoded as the file system names them."""
    return [p.decode("utf-8", errors="surrogateescape") for p in output.split(b"\0") if p]
