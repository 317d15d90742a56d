"""``python -m audit_mcp.surfaces.reference``: write the generated reference pages (``--check``: compare)."""

from audit_mcp.surfaces.reference import main

raise SystemExit(main())
