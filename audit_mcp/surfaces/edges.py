"""Errors at the MCP edge: every one a host or subagent sees says what was wrong and what to do.

The SDK answers a tool call whose arguments fail validation with pydantic's own text (a library URL
included), and a prompt that fails, or whose arguments fail, with "Internal server error". ``AuditServer``
words each argument problem itself, from the argument's schema (its name, the value's kind, its bounds or
choices), and a prompt's refusal is an ``invalid params`` error with the engine's message.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types import Tool as MCPTool
from pydantic import ValidationError

from audit_mcp.core.errors import AuditError, NotFoundError

T = TypeVar("T")
_MAX_SHOWN = 60


def tool_call(fn: Callable[[], T]) -> T:
    """``fn()``, its ``AuditError`` turned into the tool error the caller reads."""
    try:
        return fn()
    except AuditError as exc:
        raise ToolError(str(exc)) from exc


def prompt_call(fn: Callable[[], T]) -> T:
    """``fn()``, its ``AuditError`` turned into an invalid-params error with the engine's message (a prompt
    has no error result of its own: anything else would reach the client as an internal error)."""
    try:
        return fn()
    except AuditError as exc:
        raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc


def resource_read(fn: Callable[[], T]) -> T:
    """A resource's content; not found (before an audit exists, an unknown run) or refused with the reason."""
    try:
        return fn()
    except NotFoundError as exc:
        raise ResourceNotFoundError(str(exc)) from exc
    except AuditError as exc:
        raise ResourceError(str(exc)) from exc


def argument_problems(error: ValidationError, what: str) -> str:
    """Every argument problem of one call, in words, with what to send instead."""
    lines = [_problem(e) for e in error.errors(include_url=False)]
    return (
        f"{what} was refused, nothing was done: "
        + "; ".join(lines)
        + f". Call {what.split()[-1]} again with them fixed."
    )


def _problem(error: Mapping[str, Any]) -> str:
    name = ".".join(str(part) for part in error.get("loc", ())) or "the arguments"
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    given = error.get("input")
    shown = repr(given) if isinstance(given, str | int | float | bool) else f"a {type(given).__name__}"
    shown = shown if len(shown) <= _MAX_SHOWN else shown[:_MAX_SHOWN] + "..."
    if kind == "missing":
        return f"`{name}` is required"
    if kind == "extra_forbidden":
        return f"`{name}` is not an argument of this call; leave it out"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        bounds = {"greater_than_equal": "at least", "greater_than": "more than"}
        bounds |= {"less_than_equal": "at most", "less_than": "less than"}
        limit = next(iter(ctx.values()), "?")
        return f"`{name}` is {shown}; it must be {bounds[kind]} {limit}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"`{name}` is {shown}; give a whole number"
    if kind in ("bool_parsing", "bool_type"):
        return f"`{name}` is {shown}; give true or false"
    if kind == "literal_error":
        return f"`{name}` is {shown}; give one of {ctx.get('expected', 'the listed values')}"
    if kind in ("string_too_long", "too_long"):
        return f"`{name}` is too long; at most {ctx.get('max_length', '?')}"
    if kind in ("string_too_short", "too_short"):
        return f"`{name}` is too short; at least {ctx.get('min_length', '?')}"
    if kind in ("string_type", "list_type", "dict_type", "float_type", "float_parsing"):
        wanted = {"string_type": "a string", "list_type": "a list", "dict_type": "an object"}.get(kind, "a number")
        return f"`{name}` is {shown}; give {wanted}"
    if kind == "string_pattern_mismatch":
        return f"`{name}` is {shown}; it must match {ctx.get('pattern', 'the documented form')}"
    return f"`{name}` is {shown}: {str(error.get('msg', 'not a valid value')).removeprefix('Value error, ')}"


def _untitled(node: Any, *, names: bool = False) -> Any:
    """A tool's input schema as a model needs to read it: without the ``title`` pydantic gives every property
    (its name again), and an optional argument as its own type (not ``anyOf`` it or null, default null: an
    argument not required may be left out)."""
    if isinstance(node, dict):
        options = node.get("anyOf")
        if not names and isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
            rest = {k: v for k, v in node.items() if k != "anyOf" and not (k == "default" and v is None)}
            return _untitled({**next(o for o in options if o != {"type": "null"}), **rest})
        return {
            k: _untitled(v, names=k in ("properties", "$defs") and not names)
            for k, v in node.items()
            if names or k != "title"
        }
    if isinstance(node, list):
        return [_untitled(v) for v in node]
    return node


def _validation_cause(exc: BaseException) -> ValidationError | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ValidationError):
            return seen
        seen = seen.__cause__
    return None


class AuditServer(MCPServer):
    """The SDK's server, with argument problems of tools and prompts worded for the caller, and tool
    descriptions as a model reads them: dedented (a docstring's indentation is characters every host
    conversation pays for)."""

    async def list_tools(self) -> list[MCPTool]:
        return [
            tool.model_copy(
                update={
                    "description": inspect.cleandoc(tool.description) if tool.description else tool.description,
                    "input_schema": _untitled(tool.input_schema),
                }
            )
            for tool in await super().list_tools()
        ]

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(argument_problems(cause, f"the call to {name}")) from cause
            raise

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None, context: Any = None) -> Any:
        try:
            return await super().get_prompt(name, arguments, context)
        except MCPError:
            raise
        except ValueError as exc:
            cause = _validation_cause(exc)
            if cause is not None:
                raise MCPError(code=INVALID_PARAMS, message=argument_problems(cause, f"the prompt {name}")) from exc
            prompt = self._prompt_manager.get_prompt(name)
            if prompt is None:
                known = ", ".join(p.name for p in self._prompt_manager.list_prompts())
                message = f"there is no prompt {name!r}; the prompts are {known}"
                raise MCPError(code=INVALID_PARAMS, message=message) from exc
            wanted = ", ".join(f"`{a.name}`" + (" (required)" if a.required else "") for a in prompt.arguments or [])
            message = (
                f"the prompt {name} was refused, nothing was done: {exc}. Its arguments: {wanted or 'none'}; "
                "get it again with them."
            )
            raise MCPError(code=INVALID_PARAMS, message=message) from exc
