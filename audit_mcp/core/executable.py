"""The command that runs this installation of audit-mcp, by absolute path.

Prompts hand shell commands to reviewers and hosts whose ``PATH`` may not hold ``audit-mcp`` (a server
that a host starts by absolute path, a subagent with a plain shell). The command names the running
script itself when it is one, else the script installed beside this interpreter, else whatever
``audit-mcp`` the ``PATH`` holds, else this interpreter with ``-m audit_mcp``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from functools import cache
from pathlib import Path

SCRIPT = "audit-mcp.exe" if os.name == "nt" else "audit-mcp"


def trusted_path(root: Path | None = None) -> str:
    """``PATH`` without the entries a checkout could plant a program in: empty and relative ones (they name
    the working directory, which may be the repository) and, given the audited ``root``, those inside it."""
    real_root = root.resolve() if root is not None else None
    kept = []
    for entry in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not entry or not Path(entry).is_absolute():
            continue
        if real_root is not None:
            place = Path(entry).resolve()
            if place == real_root or real_root in place.parents:
                continue
        kept.append(entry)
    return os.pathsep.join(kept)


def find_program(name: str, root: Path | None = None) -> str | None:
    """The absolute path of program ``name`` on the trusted ``PATH`` (``trusted_path``), or ``None``."""
    return shutil.which(name, path=trusted_path(root))


@cache
def audit_mcp_command() -> tuple[str, ...]:
    """The argv prefix that runs this installation's CLI from any working directory and any ``PATH``."""
    running = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if running is not None and running.name == SCRIPT and running.is_file():
        return (str(running.absolute()),)
    # Not resolved: a virtual environment's python is a symlink whose target has no audit-mcp beside it.
    beside = Path(sys.executable).absolute().parent / SCRIPT
    if beside.is_file():
        return (str(beside),)
    found = find_program(SCRIPT)
    if found:
        return (str(Path(found).absolute()),)
    return (str(Path(sys.executable).absolute()), "-m", "audit_mcp")


def command_line(*args: str) -> str:
    """``audit-mcp ARGS...`` as one shell line, every part quoted as needed."""
    return " ".join(shlex.quote(part) for part in (*audit_mcp_command(), *args))
