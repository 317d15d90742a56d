"""`python -m audit_mcp`: the same command line as `audit-mcp`."""

from __future__ import annotations

import sys

from audit_mcp.surfaces.cli import main

if __name__ == "__main__":
    sys.exit(main())
