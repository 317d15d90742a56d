"""What every verb shares: the common options, reading JSON input, writing JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from audit_mcp.core.errors import ConfigError
from audit_mcp.usecases.service import AuditService

Handler = Callable[[argparse.Namespace], int]
Subparsers = Any  # argparse's _SubParsersAction is private; its add_parser is all the verb modules use


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


def verb(
    sub: Subparsers, name: str, handler: Handler, help_text: str, *, common: bool = True
) -> argparse.ArgumentParser:
    """Add one verb: its parser, the common options, and the function that runs it."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help_text)
    if common:
        add_common(parser)
    parser.set_defaults(handler=handler)
    return parser


def service_for(args: argparse.Namespace) -> AuditService:
    return AuditService(args.root or Path.cwd(), args.artifacts_dir, config_path=args.config)


def read_json(source: str) -> Any:
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {source}: {exc.strerror}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source} is not valid JSON: {exc}") from exc


def emit(value: BaseModel | dict[str, Any] | str) -> None:
    if isinstance(value, BaseModel):
        sys.stdout.write(value.model_dump_json(indent=2) + "\n")
    elif isinstance(value, dict):
        sys.stdout.write(json.dumps(value, indent=2) + "\n")
    else:
        sys.stdout.write(value if value.endswith("\n") else value + "\n")


def say(line: str) -> None:
    """A message for the person at the terminal (stderr)."""
    print(f"audit-mcp: {line}", file=sys.stderr, flush=True)
