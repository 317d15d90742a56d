"""The argument parser, assembled from the verb modules in the order ``--help`` lists them."""

from __future__ import annotations

import argparse

from audit_mcp.core.version import __version__
from audit_mcp.surfaces.cli import loop, operations, results, running, serving, stages, views


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="audit-mcp",
        description="A complete, provable code audit, run through "
        "your coding agent. JSON on stdout; messages on stderr.",
    )
    parser.add_argument("--version", action="version", version=f"audit-mcp {__version__}")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for module in (serving, loop, results, views, operations, stages, running):
        module.register(sub)
    return parser
