"""The MCP reference, from the server itself: what it lists to an in-memory client (tools with their
arguments, resources, resource templates, prompts) and the submission schema it publishes as a resource."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from audit_mcp.surfaces.reference.markdown import STAMP, Schema, md, summary, table


async def _listing(root: Path) -> dict[str, Any]:
    from mcp import Client

    from audit_mcp.surfaces.server import build_server

    async with Client(build_server(root)) as client:
        schema = await client.read_resource("audit://schemas/submission")
        return {
            "tools": (await client.list_tools()).tools,
            "resources": (await client.list_resources()).resources,
            "templates": (await client.list_resource_templates()).resource_templates,
            "prompts": (await client.list_prompts()).prompts,
            "submission": json.loads(getattr(schema.contents[0], "text", "{}")),
            "instructions": client.instructions,
        }


def mcp_listing() -> dict[str, Any]:
    """What the server lists, read through an in-memory client from a server on an empty folder."""
    import anyio

    with tempfile.TemporaryDirectory() as folder:
        listing: dict[str, Any] = anyio.run(_listing, Path(folder))
    return listing


def _hints(annotations: Any) -> str:
    if annotations is None:
        return ""
    said = [
        ("read-only", annotations.read_only_hint),
        ("idempotent", annotations.idempotent_hint),
        ("destructive", annotations.destructive_hint),
    ]
    return ", ".join(name if value else f"not {name}" for name, value in said if value is not None)


def _fields(schema: Schema) -> list[list[str]]:
    required = set(schema.get("required", ()))
    return [
        [f"`{name}`", summary(prop), "yes" if name in required else "", str(prop.get("description", ""))]
        for name, prop in schema.get("properties", {}).items()
    ]


def page(listing: Mapping[str, Any] | None = None) -> str:
    listing = listing or mcp_listing()
    tools, prompts = listing["tools"], listing["prompts"]
    out = [
        "# MCP reference",
        "",
        STAMP,
        "",
        f"The server names itself `audit-mcp` and tells every client: {md(listing['instructions'])}",
        "",
        "## Tools",
        "",
        "Every tool returns structured content (the model named under *returns*) and the same JSON as text. What "
        "`results` and `usage` hold is under [The submission](#the-submission).",
        "",
        *table(
            ["tool", "title", "returns"],
            [[f"[`{t.name}`](#{t.name})", t.title, (t.output_schema or {}).get("title", "")] for t in tools],
        ),
    ]
    for tool in tools:
        schema = tool.input_schema
        out += [
            f"### `{tool.name}`",
            "",
            f"**{tool.title}** ({_hints(tool.annotations)}).",
            "",
            md(tool.description),
            "",
        ]
        out += table(["argument", "type", "required", "what"], _fields(schema))
        for name, definition in schema.get("$defs", {}).items():
            out += [f"Each `{name}`: {md(definition.get('description', ''))}", ""]
            out += table(["field", "type", "required", "what"], _fields(definition))
    out += ["## Resources", ""]
    out += table(
        ["URI", "title", "type", "what"],
        [[f"`{r.uri}`", r.title, r.mime_type, r.description] for r in listing["resources"]],
    )
    out += ["## Resource templates", ""]
    out += table(
        ["URI template", "title", "type", "what"],
        [[f"`{r.uri_template}`", r.title, r.mime_type, r.description] for r in listing["templates"]],
    )
    out += ["## Prompts", "", "Most hosts offer them as slash commands.", ""]
    for prompt in prompts:
        out += [f"### `{prompt.name}`", "", f"**{prompt.title}**. {md(prompt.description)}", ""]
        args = [[f"`{a.name}`", "yes" if a.required else "", a.description] for a in prompt.arguments or ()]
        out += table(["argument", "required", "what"], args)
    submission = listing["submission"]
    defs = submission.get("$defs", {})
    out += [
        "## The submission",
        "",
        "What `submit_packet` takes, from the resource `audit://schemas/submission`: "
        f"{md(submission.get('description', ''))}",
        "",
        *table(["field", "type", "required", "what"], _fields(submission)),
    ]
    for name in ("TaskResult", "Finding", "RelatedLocation", "LeadVerdict", "Usage"):
        out += [f"### {name}", "", md(defs[name].get("description", "")), ""]
        out += table(["field", "type", "required", "what"], _fields(defs[name]))
    return "\n".join(out).rstrip() + "\n"
