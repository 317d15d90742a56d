"""A review packet's part of the code map: the other side of its files' boundaries, within a budget.

For the files (or chunks) of one packet: what they call or use in other files (each definition's signature
and the lines of it that check, raise, sign, escape or authorize), where other files call them (the call
sites, a line each), the routes and the threat model's entry points and controls that reach them, and, where
a control sits on one side of the boundary, a line telling the reviewer to check both sides together. Pure:
the graph, the entry points, the threat model and a way to read a file's lines in; Markdown out. Code quoted
from the repository is untrusted and goes into fences.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from audit_mcp.core.escape import md_code, md_fence, md_inline
from audit_mcp.engine.codemap.graph import CodeGraph
from audit_mcp.engine.codemap.model import Entry

Lines = Callable[[str], Sequence[str] | None]  # a file's lines (None when it cannot be read)
MAP_TOKENS = 3_000  # the most a packet's map takes of its prompt (packing reserves it)
MAP_CHARS = int(MAP_TOKENS * 2.5)  # the same in characters (``packet_prompts.estimate_tokens``)
MAX_EXCERPT_LINES = 8
MAX_REACHING = 4  # routes elsewhere whose files call into the packet's files
# A definition named like a control: it checks, authorizes, signs or escapes something.
_CONTROL = re.compile(
    r"auth|permission|perm_|allow|deny|forbid|(?:^|_)can_|^can[A-Z]|(?:^|_)is_?(?:admin|staff|owner|superuser|"
    r"authenticated|allowed|valid|safe)|has_?(?:perm|role|access)|check|verif|valid|saniti|escape|csrf|xsrf|sign|"
    r"hmac|guard|require|acl|polic|login|privilege|grant",
    re.I,
)
# A line of a definition that guards: a condition, a refusal, or a call that checks, signs or escapes.
# The first line of a type, not a function: a type is used, not called to guard.
_TYPE_LINE = re.compile(r"\b(?:class|interface|struct|record|enum|trait|type|union|protocol|object)\s+\w")
_GUARD_LINE = re.compile(
    r"\b(?:if|unless|elif|else if|guard|assert|raise|throw|panic|abort|deny|reject|return\s+(?:false|none|nil|"
    r"null|err|-1|40[13]))\b|(?:check|verif|valid|saniti|escape|sign|hmac|compare_digest|authori|authenti|"
    r"permission|require|csrf)\w*\s*\(",
    re.I,
)
Span = tuple[str, str, int, int]  # file, definition, start, end


def map_tokens(budget: int) -> int:
    """The tokens a packet's map may take of a packet ``budget``: ``MAP_TOKENS``, less in a small packet."""
    return min(MAP_TOKENS, max(400, budget // 16))


@dataclass(frozen=True)
class MapInputs:
    """What a packet's map is drawn from."""

    graph: CodeGraph
    lines: Lines
    entries: Sequence[Entry] = ()
    threat_model: Mapping[str, Any] | None = None
    budget_chars: int = MAP_CHARS
    enabled: bool = True  # ``code_map = false`` in the config: intake mapped nothing


@dataclass
class _Section:
    title: str
    items: list[str] = field(default_factory=list)


def _inside(line: int, ranges: Sequence[tuple[int, int]]) -> bool:
    return line == 0 or any(start <= line <= end for start, end in ranges)


def packet_map(units: Sequence[tuple[str, int, int]], inputs: MapInputs) -> str:
    """The map section of a packet whose units are ``(path, start line, end line)``."""
    if not inputs.enabled:
        return (
            "This audit runs without the code map (`code_map = false` in its config): find where these files' "
            "calls lead, and who calls them, yourself."
        )
    ranges: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for path, start, end in units:
        ranges[path].append((start, end))
    graph = inputs.graph
    within: list[str] = []
    callees: dict[Span, list[tuple[str, int]]] = defaultdict(list)  # what the packet reaches elsewhere
    callers: dict[Span, list[tuple[str, int]]] = defaultdict(list)  # where other files reach the packet
    files_out: dict[str, set[str]] = defaultdict(set)
    for path in sorted(ranges):
        for edge in graph.outgoing(path):
            inner = edge.dst in ranges
            names = []
            for how, name, line, start, end, _ in edge.links:
                if how == "import" or not _inside(line, ranges[path]):
                    continue
                if inner:
                    names.append(name)
                else:
                    callees[(edge.dst, name, start, end)].append((path, line))
                    files_out[path].add(edge.dst)
            if inner and names:
                shown = ", ".join(md_code(n) for n in sorted(set(names))[:6])
                within.append(f"- {md_code(path)} → {md_code(edge.dst)}: {shown}")
        for edge in graph.incoming(path):
            if edge.src in ranges:
                continue
            for how, name, line, start, end, _ in edge.links:
                if how != "import" and _inside(start, ranges[path]):
                    callers[(path, name, start, end)].append((edge.src, line))
    check: list[str] = []
    out_items = _callees(callees, inputs.lines, check)
    in_items = _callers(callers, inputs.lines, check)
    entry_items = _entries(ranges, inputs, check)
    sections = [
        _Section("Check these together", check),
        _Section("What these files call in other files (signature, then the lines that guard)", out_items),
        _Section("Where other files call these files", in_items),
        _Section("Ways in that reach these files", entry_items),
        _Section("Between the files of this packet", within),
    ]
    return _render(sections, inputs.budget_chars)


def _excerpt(lines: Sequence[str] | None, start: int, end: int, name: str) -> str | None:
    """A definition's signature and its guarding lines, numbered (the whole of a short control), or ``None``
    when it cannot be read."""
    if lines is None or start < 1 or start > len(lines):
        return None
    end = min(max(start, end), len(lines), start + 400)
    whole = end - start < MAX_EXCERPT_LINES and _CONTROL.search(name) is not None
    shown = [(start, lines[start - 1])]
    for number in range(start + 1, end + 1):
        text = lines[number - 1]
        comment = text.lstrip().startswith(("#", "//", "*", "/*"))
        if (whole and text.strip()) or (_GUARD_LINE.search(text) and not comment):
            shown.append((number, text))
            if len(shown) > MAX_EXCERPT_LINES:
                break
    width = len(str(shown[-1][0]))
    return "\n".join(f"{n:>{width}}: {text.rstrip()[:160]}" for n, text in shown)


def _is_type(lines: Sequence[str] | None, start: int) -> bool:
    """Whether the definition at ``start`` is a type (its first lines, past annotations, declare one)."""
    return lines is not None and any(_TYPE_LINE.search(line) for line in lines[max(0, start - 1) : start + 2])


def _guarding(name: str, excerpt: str | None, is_type: bool) -> bool:
    """Whether a definition is a control: a function named like one, or with a guard that names one."""
    if is_type:
        return False
    if excerpt is None:
        return _CONTROL.search(name) is not None
    rest = excerpt.splitlines()[1:]
    return _CONTROL.search(name) is not None or any(_GUARD_LINE.search(ln) and _CONTROL.search(ln) for ln in rest)


def _callees(found: Mapping[Span, list[tuple[str, int]]], read: Lines, check: list[str]) -> list[str]:
    items: list[tuple[int, str]] = []
    for (dst, name, start, end), sites in found.items():
        where = ", ".join(f"{md_code(src)}:{line}" for src, line in sorted(set(sites))[:4])
        if start:
            source = read(dst)
            excerpt = _excerpt(source, start, end, name)
            head = f"- {md_code(name)} in {md_code(f'{dst}:{start}-{end}')}, from {where}"
            body = f"\n\n{_indent(md_fence(excerpt))}\n" if excerpt else ""
            guard = _guarding(name, excerpt, _is_type(source, start))
            items.append((0 if guard else 1, head + body))
            if guard:
                users = sorted({src for src, _ in sites})
                check.append(
                    f"- {', '.join(md_code(u) for u in users[:3])} relies on {md_code(name)} "
                    f"({md_code(f'{dst}:{start}')}) to guard it: check that every path that needs the guard calls it, "
                    "and that the guard checks what its callers assume."
                )
        else:
            items.append((2, f"- {md_code(dst)} ({md_inline(name)}), from {where}"))
    return [text for _, text in sorted(items, key=lambda item: item[0])]


def _callers(found: Mapping[Span, list[tuple[str, int]]], read: Lines, check: list[str]) -> list[str]:
    items: list[tuple[int, str]] = []
    for (path, name, start, _end), sites in found.items():
        shown = []
        for src, line in sorted(set(sites))[:4]:
            text = (read(src) or [])[line - 1 : line]
            quoted = f" {md_code(text[0].strip()[:100])}" if text and text[0].strip() else ""
            shown.append(f"{md_code(src)}:{line}{quoted}")
        more = f" and {len(set(sites)) - 4} more" if len(set(sites)) > 4 else ""
        label = f"{md_code(name)} ({md_code(f'{path}:{start}')})" if start else md_code(path)
        guard = bool(start) and _CONTROL.search(name) is not None and not _is_type(read(path), start)
        items.append((0 if guard else 1, f"- {label} is called from {'; '.join(shown)}{more}"))
        if guard:
            check.append(
                f"- {md_code(name)} ({md_code(f'{path}:{start}')}) is a control other files rely on "
                f"({', '.join(md_code(src) for src, _ in sorted(set(sites))[:3])}): a change in what it checks "
                "changes what they allow."
            )
    return [text for _, text in sorted(items, key=lambda item: item[0])]


def _entries(ranges: Mapping[str, list[tuple[int, int]]], inputs: MapInputs, check: list[str]) -> list[str]:
    graph = inputs.graph
    near: dict[str, str] = {}  # a file one edge away, and how it touches the packet
    for path in ranges:
        for edge in graph.incoming(path):
            near.setdefault(edge.src, f"calls into {md_code(path)}")
        for edge in graph.outgoing(path):
            near.setdefault(edge.dst, f"is called by {md_code(path)}")
    items: list[str] = []
    reaching: list[str] = []
    for entry in inputs.entries:
        shown = f"- {md_inline(entry.how)}: {md_code(entry.symbol)} at {md_code(f'{entry.path}:{entry.line}')}"
        if entry.path in ranges and _inside(entry.line, ranges[entry.path]):
            items.append(shown)
        elif entry.path in near and near[entry.path].startswith("calls"):
            reaching.append(f"{shown}, whose file {near[entry.path]}")
    items += reaching[:MAX_REACHING]
    if len(reaching) > MAX_REACHING:
        items.append(f"- and {len(reaching) - MAX_REACHING} more route(s) whose files call into these files")
    model = inputs.threat_model or {}
    for key, label in (("entry_points", "threat model entry point"), ("controls", "threat model control")):
        for item in model.get(key, []) if isinstance(model.get(key), list) else []:
            where = str(item.get("path", "")) if isinstance(item, Mapping) else ""
            what = str(item.get("name") or item.get("description") or "") if isinstance(item, Mapping) else ""
            how = _reach(where, ranges, near)
            if how is None:
                continue
            items.append(f"- {label} {md_code(where)} ({md_inline(what[:120])}) {how}")
            if key == "controls" and "in this packet" not in how:
                check.append(
                    f"- The threat model names {md_code(where)} as a control, and it {how.removeprefix('which ')}: "
                    "check that these files cannot be reached without it."
                )
    return items


def _reach(where: str, ranges: Mapping[str, list[tuple[int, int]]], near: Mapping[str, str]) -> str | None:
    if not where:
        return None
    if where in ranges:
        return "is in this packet"
    folder = where.rstrip("/") + "/"
    if where == "." or any(path.startswith(folder) for path in ranges):
        return "holds files of this packet"
    if where in near:
        return f"which {near[where]}"
    return None


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _render(sections: Sequence[_Section], budget: int) -> str:
    if not any(s.items for s in sections):
        return "The code map found no link between these files and any other file of the repository."
    out = [
        "Read with tree-sitter from the whole repository: definitions, imports, calls, and the strings that name "
        "templates, routes and configuration. Each link is a place to look, not proof: open the other file "
        "where the lines below are not enough."
    ]
    used = len(out[0])
    left = 0
    for section in sections:
        if not section.items:
            continue
        title = f"\n**{section.title}:**\n"
        kept = []
        for item in section.items:
            if used + len(title) + len(item) + 1 > budget:
                left += 1
                continue
            kept.append(item)
            used += len(item) + 1
        if kept:
            out.append(title + "\n".join(kept))
            used += len(title)
    if left:
        out.append(f"\n({left} more link(s) left out for length.)")
    return "\n".join(out)
