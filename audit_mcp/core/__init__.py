"""The vocabulary every layer shares, and nothing else.

Errors (``errors``), the session config (``config``), the result contracts the
surfaces return (``models``; ``operations`` for the operator verbs), checks on
identifiers and free text (``text``), confined paths and atomic writes
(``fs``), the progress callback type (``progress``), the taxonomy findings are
filed under (``taxonomy``, with the CWE names of ``cwe``) and the version
(``version``).

May import: nothing of audit_mcp. Imported by every layer.
"""
