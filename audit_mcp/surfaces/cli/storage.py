"""``store init|migrate|status``: the state backend of a checkout, for operators."""

from __future__ import annotations

import argparse
from pathlib import Path

from audit_mcp.surfaces.cli.common import Subparsers, emit, verb
from audit_mcp.surfaces.cli.exits import EXIT_OK

_HELP = {
    "init": "create the store (for PostgreSQL: its schemas) and apply every migration",
    "migrate": "apply the migrations still pending, and name them",
    "status": "backend, location, migrations applied and pending, audits, repositories; changes nothing",
}


def register(sub: Subparsers) -> None:
    p = verb(sub, "store", _store, "the state backend: init, migrate, status (SQLite or a shared PostgreSQL)")
    p.add_argument("action", choices=tuple(_HELP), help="; ".join(f"{k}: {v}" for k, v in _HELP.items()))


def _store(args: argparse.Namespace) -> int:
    from audit_mcp.usecases.store_admin import store_command

    emit(
        store_command(
            args.action,
            args.root or Path.cwd(),
            args.artifacts_dir,
            config_path=args.config,
            store=args.store,
            audit_name=args.audit_name,
        )
    )
    return EXIT_OK
