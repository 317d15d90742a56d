"""The command-line reference, from the argparse parser: every verb, its help, every option with its help,
default and choices, the common options once, and the exit codes of the parser's epilog."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence

from audit_mcp.surfaces.cli.common import add_common
from audit_mcp.surfaces.cli.parser import build_parser
from audit_mcp.surfaces.reference.markdown import STAMP, md, sentence, table


def _value(action: argparse.Action) -> str:
    """The placeholder of an option's value, as ``--help`` shows it."""
    if action.choices and not action.metavar:
        return "{" + ",".join(map(str, action.choices)) + "}"
    return str(action.metavar or action.dest.upper())


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{_value(action)}`"
    value = "" if action.nargs == 0 else f" {_value(action)}"
    return ", ".join(f"`{flag}`{value}" for flag in action.option_strings)


def _default(action: argparse.Action) -> str:
    value = action.default
    if value is None or value is False or value == [] or value == argparse.SUPPRESS or action.nargs == 0:
        return ""
    return f"`{value}`"


def _option_rows(actions: Iterable[argparse.Action]) -> list[list[str]]:
    rows = []
    for action in actions:
        notes = [sentence(action.help)]
        if action.choices:
            notes.append("Choices: " + ", ".join(f"`{c}`" for c in action.choices) + ".")
        if isinstance(action, argparse._AppendAction) and "repeatable" not in str(action.help).lower():
            notes.append("Repeatable.")
        if action.required:
            notes.append("Required.")
        rows.append([_flags(action), " ".join(n for n in notes if n), _default(action)])
    return rows


def _synopsis(name: str, own: Sequence[argparse.Action], takes_common: bool) -> str:
    words = ["audit-mcp", name]
    for action in own:
        if not action.option_strings:
            words.append(f"[{_value(action)}]" if action.nargs == "?" else _value(action))
        elif action.required:
            words.append(f"{action.option_strings[0]} {_value(action)}")
    if takes_common or any(a.option_strings and not a.required for a in own):
        words.append("[options]")
    return " ".join(words)


def page(parser: argparse.ArgumentParser | None = None) -> str:
    parser = parser or build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: str(choice.help) for choice in sub._choices_actions}
    probe = argparse.ArgumentParser(add_help=False)
    add_common(probe)
    common = {action.dest for action in probe._actions}
    alone = [n for n, p in sub.choices.items() if not common <= {a.dest for a in p._actions}]
    out = [
        "# Command-line reference",
        "",
        STAMP,
        "",
        f"`audit-mcp`: {md(parser.description)} `python -m audit_mcp` runs the same command line; "
        "`audit-mcp VERB --help` prints a verb's part of this page.",
        "",
        *table(["verb", "what it does"], [[f"[`{name}`](#{name})", helps[name]] for name in sub.choices]),
        "## Common options",
        "",
        "Every verb that works on a repository takes these"
        + (f" (all but {', '.join(f'`{n}`' for n in alone)})" if alone else "")
        + ":",
        "",
        *table(["option", "what", "default"], _option_rows(a for a in probe._actions)),
        "## Exit codes",
        "",
        *table(
            ["code", "meaning"],
            [line.split(None, 1) for line in (parser.epilog or "").splitlines()[1:] if line.strip()],
        ),
    ]
    for name, verb in sub.choices.items():
        own = [a for a in verb._actions if a.dest not in common and a.dest != "help"]
        takes_common = common <= {a.dest for a in verb._actions}
        out += [f"## `{name}`", "", md(verb.description), "", f"    {_synopsis(name, own, takes_common)}", ""]
        if own:
            out += table(["option", "what", "default"], _option_rows(own))
        out += ["Takes the [common options](#common-options).", ""] if takes_common else []
    return "\n".join(out).rstrip() + "\n"
