"""The command line: the same verbs as the MCP tools, JSON on stdout, messages on stderr.

``parser`` builds the argument parser from the verb modules, each of which
registers its verbs with their handlers: ``serving`` (``serve``), ``loop``
(``next-step``, ``submit-packet``, ``merge-and-ingest``), ``results``
(``ingest-results``, ``validate-results``), ``views`` (``quota``,
``status``, ``report``), ``operations`` (``explain-task``, ``requeue``,
``abandon``, ``cleanup``), ``stages`` (``intake``, ``plan``,
``synthesize``) and ``running`` (``run``, ``demo``).
``common`` holds the shared options and output helpers, ``exits`` the exit
codes. Errors become a message on stderr and an exit code here, and only here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from audit_mcp.core.errors import AuditError, InputError
from audit_mcp.core.userstate import STATE_ENV
from audit_mcp.surfaces.cli.common import emit_refusal, say
from audit_mcp.surfaces.cli.exits import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_REFUSED
from audit_mcp.surfaces.cli.parser import build_parser

__all__ = ["build_parser", "main", "run"]


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for resume commands (the hand-off of `run`)
    if getattr(args, "state_dir", None) is not None:
        # One place decides the state directory for the whole process (and the commands it prints).
        os.environ[STATE_ENV] = str(Path(args.state_dir).expanduser().absolute())
    code: int = args.handler(args)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except InputError as exc:
        emit_refusal(exc)
        say(f"refused: {exc}")
        return EXIT_REFUSED
    except AuditError as exc:
        say(f"error: {exc}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("audit-mcp: interrupted; accepted work is saved", file=sys.stderr)
        return EXIT_INTERRUPTED
