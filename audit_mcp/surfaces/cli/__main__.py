"""``python -m audit_mcp.surfaces.cli``: the same as the ``audit-mcp`` command."""

import sys

from audit_mcp.surfaces.cli import main

sys.exit(main())
