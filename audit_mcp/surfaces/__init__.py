"""The edges people and hosts touch: the MCP server, the CLI, the headless runner, the demo.

``server`` (MCP tools, resources and prompts), ``channels`` (what MCP
sessions hear besides replies: log levels, resource updates), ``cli`` (the same verbs, JSON
on stdout), ``headless`` (``audit-mcp run``: launches review workers itself),
``demo`` (a scripted audit of the bundled fixture), ``http_auth`` (the bearer
token in front of streamable HTTP), ``page_route`` (the live audit page at
``/``), ``status_table`` and ``terminal`` (what a
person sees in a terminal), ``reference`` (the documentation's reference pages, generated
from the parser, the config model and the server). Errors become ``ToolError`` or an exit
code here, and only here.

May import: ``usecases`` (the ``AuditService`` facade) and ``core``; the
layers below only where a surface needs a pure helper of theirs.
"""
