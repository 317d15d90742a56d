"""The store: the audit's authoritative state, behind one narrow interface.

``Store`` (``sqlite``) opens transactions; each yields a ``Tx`` whose queries are
split by aggregate (``audits``, ``cells``, ``runs``, ``findings``, ``opinions``, ``ledger``);
``records`` holds the rows they return; ``migrations`` the named schema steps.
Connection handling lives in ``sqlite`` alone, and every SQL statement in this
package.

May import: ``audit_mcp.core``. Imported by every layer above.
"""
