"""What every verb shares: the common options, reading JSON input, writing JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from audit_mcp.core.errors import InputError, PathError
from audit_mcp.core.escape import terminal
from audit_mcp.surfaces.cli.exits import EXIT_USAGE

if TYPE_CHECKING:
    from pydantic import BaseModel

    from audit_mcp.usecases.service import AuditService
    from audit_mcp.usecases.workspace import Workspace

W = TypeVar("W", bound="Workspace")

Handler = Callable[[argparse.Namespace], int]
Subparsers = Any  # argparse's _SubParsersAction is private; its add_parser is all the verb modules use


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error exiting ``EXIT_USAGE`` (64), not 2: 2 means a refused submission."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def bool_arg(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--root", type=Path, default=None, help="repository to audit (default: the current directory)")
    parser.add_argument(
        "--artifacts-dir", type=Path, default=None, help="where state and reports live (default: <root>/.audit-mcp)"
    )
    parser.add_argument("--config", type=Path, default=None, help="session config (default: <root>/.audit-mcp.toml)")
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="your audit-mcp state directory: the key that seals artifacts folders, learned rate limits, the HTTP "
        "token (default: AUDIT_MCP_STATE_DIR, else $XDG_STATE_HOME/audit-mcp or ~/.local/state/audit-mcp)",
    )
    parser.add_argument(
        "--store",
        default=None,
        help="where state lives: 'sqlite' (default, in the artifacts directory) or a postgresql:// URL shared by "
        "hosts (default: AUDIT_MCP_STORE, else your config's store key)",
    )
    parser.add_argument(
        "--audit-name",
        default=None,
        help="in a shared store, the audit this checkout joins (default: the repository's first commit and origin)",
    )


def verb(
    sub: Subparsers, name: str, handler: Handler, help_text: str, *, common: bool = True
) -> argparse.ArgumentParser:
    """Add one verb: its parser, the common options, and the function that runs it."""
    # The help line is also the verb's description, shown first by `audit-mcp VERB --help`.
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help_text, description=help_text[:1].upper() + help_text[1:] + "."
    )
    if common:
        add_common(parser)
    parser.set_defaults(handler=handler)
    return parser


def service_for(args: argparse.Namespace) -> AuditService:
    # Imported here: a verb loads the service, and every use case with it, only when it runs.
    from audit_mcp.usecases.service import AuditService

    return _opened(AuditService, args)


def workspace_for(args: argparse.Namespace) -> Workspace:
    """The audit's workspace alone, for a verb that calls one use case: it loads that one, not the service's
    every use case (``quota`` and ``status`` start in a fraction of the time)."""
    from audit_mcp.usecases.workspace import Workspace

    return _opened(Workspace, args)


def _opened(kind: type[W], args: argparse.Namespace) -> W:
    """``kind`` (the service or its workspace) for the root, artifacts, config, store and audit name given."""
    return kind(
        args.root or Path.cwd(),
        args.artifacts_dir,
        config_path=args.config,
        store=args.store,
        audit_name=args.audit_name,
    )


def read_input(source: str, where: str) -> bytes:
    """The bytes of a JSON input file ('-' is stdin), at most four times what a payload may hold; ``InputError``
    otherwise."""
    # Loaded by the verbs that read input only: the views and --version never do.
    from audit_mcp.core.fs import read_capped
    from audit_mcp.engine.checks import MAX_PAYLOAD_CHARS

    limit = 4 * MAX_PAYLOAD_CHARS
    try:
        data = sys.stdin.buffer.read(limit + 1) if source == "-" else read_capped(Path(source), limit)
    except (OSError, PathError) as exc:
        raise InputError(
            [(where, f"cannot read {source}: {exc}")], "Nothing changed. Fix the path and run again."
        ) from exc
    if len(data) > limit:
        raise InputError([(where, f"{source} is over {limit} bytes")], "Nothing changed. Send less.")
    return data


def read_json(source: str, where: str = "/") -> Any:
    """The JSON value in a file ('-' is stdin); malformed text of any kind is an ``InputError``."""
    from audit_mcp.engine.checks import decode_json

    value, problem = decode_json(read_input(source, where))
    if problem is not None:
        raise InputError([(where, f"{source}: {problem}")], "Nothing changed. Fix the file and run again.")
    return value


def emit_refusal(exc: InputError) -> None:
    """A refusal on stdout as JSON: every problem with its location, and what to do."""
    emit(
        {
            "accepted": False,
            "refused": True,
            "errors": [{"location": loc, "message": msg} for loc, msg in exc.problems],
            "next_action": exc.next_action,
        }
    )


def emit(value: BaseModel | dict[str, Any] | str) -> None:
    """JSON (or a text for people) on stdout; text never carries a terminal escape sequence, and neither does
    JSON shown on a terminal (its strings can hold file names and reviewer text)."""
    if isinstance(value, dict):
        text = json.dumps(value, indent=2) + "\n"
    elif isinstance(value, str):
        text = terminal(value if value.endswith("\n") else value + "\n")
    else:  # a result model (pydantic, loaded only by the verbs that return one)
        text = value.model_dump_json(indent=2) + "\n"
    sys.stdout.write(terminal(text) if sys.stdout.isatty() else text)


def say(line: str) -> None:
    """A message for the person at the terminal (stderr), without escape sequences."""
    print(f"audit-mcp: {terminal(line)}", file=sys.stderr, flush=True)
