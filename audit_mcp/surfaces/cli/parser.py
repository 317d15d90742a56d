"""The argument parser, assembled from the verb modules in the order ``--help`` lists them."""

from __future__ import annotations

import argparse

from audit_mcp.core.version import __version__
from audit_mcp.surfaces.cli import evidence, loop, operations, results, running, serving, stages, storage, views
from audit_mcp.surfaces.cli.common import Parser

EXIT_CODES = """exit codes:
  0   ok (for run: the audit is complete)
  1   error: a bad value, configuration or state; the message on stderr says what to fix
  2   refused: a submission was refused; the receipt (JSON on stdout) lists every error and its fix
  3   partial: the audit ended with gaps, or a run stopped at a cooldown and can be resumed
  4   blocked: a person must act; the step (JSON on stdout) and stderr say why, then --retry-blocked
  64  usage: the command line itself is wrong (an unknown verb or flag, a missing value)
  130 interrupted (Ctrl-C, SIGTERM); accepted work is saved"""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="audit-mcp",
        description="A complete, provable code audit, run through "
        "your coding agent. JSON on stdout; messages on stderr.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"audit-mcp {__version__}")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for module in (serving, loop, results, views, evidence, operations, stages, storage, running):
        module.register(sub)
    return parser
