"""One file's part of the map, read with its grammar's query: plain values, so a forked copy of intake can
send them back as ``marshal`` data.

A file's ``Facts`` are ``(grammar, package, defs, rest)``, ``rest`` being the ``marshal`` bytes of
``(imports, refs, strings)`` (read once, when the file's references are resolved: kept packed until then, a
large repository's facts take a fraction of the memory):

- ``defs``: ``(name, kind, start line, end line, parent)``, kind ``class``, ``function`` or ``method``
  (a function inside a class), ``parent`` the class a method belongs to;
- ``imports``: ``(spec, name, alias, line)`` (``import_nodes``);
- ``refs``: ``(chain, how, first line, count)`` for each distinct chain (``a.b.c``) the file calls
  (``how`` = ``call``) or uses otherwise (``use``);
- ``strings``: ``(text, line, context)`` for strings that may name a file, module, template or route, with the
  chain of the call they are an argument of (``@`` first for a decorator or annotation).
"""

from __future__ import annotations

import marshal
from collections.abc import Iterable
from sys import intern
from typing import Any

from tree_sitter import Node

from audit_mcp.engine.codemap.common_names import SELF
from audit_mcp.engine.codemap.grammars import Grammar, grammar_for, load
from audit_mcp.engine.codemap.import_nodes import READERS

Def = tuple[str, str, int, int, str]
Import = tuple[str, str, str, int]
Ref = tuple[str, str, int, int]
String = tuple[str, int, str]
Facts = tuple[str, str, list[Def], bytes]
Rest = tuple[list[Import], list[Ref], list[String]]

MAX_CHAIN = 160  # a longer callee text is an expression, not a name
MAX_STRING = 200
MAX_STRINGS = 400  # per file: a table of thousands of strings is data, not wiring
_CONTAINERS = ("class", "impl")
_KINDS = {"class": "class", "function": "function", "method": "method"}
_MODULE_SCOPED = frozenset({"python", "javascript", "typescript", "tsx"})
# Requiring a file by a string (Ruby, Node.js without a binding, a dynamic import).
_REQUIRE_CALLS = frozenset({"require", "require_relative", "load", "autoload", "import", "require_once"})


def _text(node: Node) -> str:
    raw = node.text
    return "" if raw is None else raw.decode("utf-8", "replace")


def chain_of(text: str) -> str:
    """A callee's text as a dotted chain: blanks dropped, ``->``, ``::``, ``?.`` and ``\\`` read as dots, PHP's
    ``$`` dropped (``$this->auth->check`` is ``this.auth.check``)."""
    if not text.isidentifier():
        text = "".join(text.split())
        for separator in ("?.", "->", "::", "\\"):
            if separator in text:
                text = text.replace(separator, ".")
        text = text.replace("$", "").strip(".")
    return text


def map_file(
    path: str, language: str, data: bytes, cut_span: int | None = None
) -> tuple[Facts | None, list[int] | None]:
    """The facts of one file of the repository (``None`` for a language the map does not parse), and the
    lines a chunk of it may start at (``extract``)."""
    if path == "go.mod" or path.endswith("/go.mod"):
        return ("gomod", _go_module(data), [], b""), None
    name = grammar_for(path, language)
    grammar = load(name) if name is not None else None
    if grammar is None:
        return None, None
    return extract(grammar, data, cut_span=cut_span)


def _go_module(data: bytes) -> str:
    for line in data.split(b"\n", 40)[:40]:
        words = line.split()
        if len(words) >= 2 and words[0] == b"module":
            return words[1].strip(b'"').decode("utf-8", "replace")
    return ""


def unpack(rest: bytes) -> Rest:
    """A file's imports, references and strings, from the bytes its facts keep them in."""
    if not rest:
        return [], [], []
    imports, refs, strings = marshal.loads(rest)
    return imports, refs, strings


def extract(grammar: Grammar, data: bytes, *, cut_span: int | None = None) -> tuple[Facts, list[int] | None]:
    """The file's map, and (when ``cut_span`` is given) the lines a chunk of it may start at: the start of
    each top-level definition or statement (with the comments just above it), and inside any that spans more
    than ``cut_span`` lines, of its parts."""
    parser, cursor = grammar.tools()
    tree = parser.parse(data)
    root = tree.root_node
    defs: dict[tuple[str, int], list[Any]] = {}
    imports: list[Import] = []
    refs: dict[str, list[Any]] = {}
    strings: list[String] = []
    package = ""
    read_import = READERS.get(grammar.name)
    roles = grammar.roles
    for index, caps in cursor.matches(root):
        role = roles[index]
        if role == "call" or role == "use":
            node = caps[role][0]
            recv = caps.get("recv")
            text = _text(node) if recv is None else f"{_text(recv[0])}.{_text(node)}"
            if len(text) > MAX_CHAIN:
                continue
            chain = chain_of(text)
            seen = refs.get(chain)
            if seen is None:
                refs[chain] = [role, node.start_point[0] + 1, 1]
            else:
                seen[2] += 1
                if role == "call":
                    seen[0] = "call"
        elif role == "str":
            if len(strings) < MAX_STRINGS:
                node = caps["str"][0]
                text = _text(node)
                # A path, module, template or route has no blank in it (a sentence for people has).
                if 0 < len(text) <= MAX_STRING and " " not in text and "\n" not in text:
                    ctx_nodes = caps.get("ctx")
                    ctx = chain_of(_text(ctx_nodes[0])) if ctx_nodes else ""
                    if (deco := caps.get("ctx.deco")) is not None:
                        ctx = "@" + chain_of(_text(deco[0]))
                    line = node.start_point[0] + 1
                    if ctx in _REQUIRE_CALLS:
                        imports.append((_relative(ctx, text), "", "", line))
                    strings.append((text, line, ctx))
        elif role == "def":
            kind = next(k[4:] for k in caps if k.startswith("def."))
            node = caps["def." + kind][0]
            name = chain_of(_text(caps["name"][0])).rpartition(".")[2]
            parent = chain_of(_text(caps["parent"][0])).rpartition(".")[2] if "parent" in caps else ""
            start, end = node.start_point[0] + 1, _last_line(node)
            if kind == "decorated":
                kind = "class" if any(c.type == "class_definition" for c in node.children) else "function"
            key = (name, end)
            known = defs.get(key)
            if known is None:
                defs[key] = [name, kind, start, end, parent]
            elif start < known[2]:
                known[2] = start  # a decorated definition starts at its first decorator
        elif role == "import":
            if read_import is not None:
                node = caps["import"][0]
                line = node.start_point[0] + 1
                imports += [(spec, name, alias, line) for spec, name, alias in read_import(node)]
        elif role == "import.spec":
            imports += _spec_import(grammar.name, caps)
        elif role == "package" and not package:
            package = chain_of(_text(caps["package"][0]))
    out_defs = _nest(defs.values())
    if grammar.name in _MODULE_SCOPED:
        _prune(refs, imports, out_defs)
    out_refs: list[Ref] = [(chain, v[0], v[1], v[2]) for chain, v in refs.items()]
    cuts = cut_lines(root, cut_span) if cut_span is not None else None
    return (grammar.name, package, out_defs, marshal.dumps((imports, out_refs, strings))), cuts


def _last_line(node: Node) -> int:
    """A node's last line (one that ends with its newline, as a macro does, ends on the line before)."""
    row, column = node.end_point
    return max(node.start_point[0] + 1, row + (1 if column else 0))


def _spec_import(grammar: str, caps: dict[str, list[Node]]) -> list[Import]:
    """An import read from the string or name it points at (``require``, ``#include``, ``mod x;``)."""
    found = caps["import.spec"][0]
    spec = _text(found)
    line = found.start_point[0] + 1
    bound = caps.get("import.bind")
    if bound is not None:
        required = caps.get("import.require")
        return _required(spec, bound[0], line) if required is not None and _text(required[0]) == "require" else []
    if grammar == "rust":
        return [("mod", spec, spec, line)]
    if grammar == "php":
        return [(_relative("require_relative", spec), "", "", line)]
    return [(spec, "", "", line)]


def _prune(refs: dict[str, list[Any]], imports: list[Import], defs: list[Def]) -> None:
    """Drop what cannot lead to another file in a language whose names are all imported (Python, JavaScript,
    TypeScript): a bare name neither imported nor defined here (a local or a builtin), and a chain on such a
    name that is not a call (``request.user``); a call on ``self`` or ``this`` stays within its class."""
    bound = {alias for _, _, alias, _ in imports if alias}
    bound.update(spec.split(".", 1)[0] for spec, name, alias, _ in imports if not name and not alias)
    local = {d[0] for d in defs}
    for chain in list(refs):
        root, dot, rest = chain.partition(".")
        if root in bound:
            continue
        if not dot:
            if root not in local:
                del refs[chain]
        elif refs[chain][0] != "call" or (root in SELF and "." not in rest):
            del refs[chain]


def _relative(ctx: str, spec: str) -> str:
    """A spec required relative to the requiring file's folder, marked as such (``./``)."""
    if ctx in ("require_relative", "require_once") and not spec.startswith("."):
        return "./" + spec.lstrip("/")
    return spec


def _required(spec: str, bound: Node, line: int) -> list[Import]:
    """``const x = require('m')`` binds ``x`` to the module; ``const {a, b: c} = require('m')`` binds names."""
    if bound.type == "identifier":
        return [(spec, "", _text(bound), line)]
    out: list[Import] = []
    for child in bound.named_children:
        if child.type == "shorthand_property_identifier_pattern":
            out.append((spec, _text(child), _text(child), line))
        elif child.type == "pair_pattern":
            key, value = child.child_by_field_name("key"), child.child_by_field_name("value")
            if key is not None and value is not None:
                out.append((spec, _text(key), _text(value), line))
    return out or [(spec, "", "", line)]


def _nest(found: Iterable[list[Any]]) -> list[Def]:
    """Definitions in order, each function inside a class (or a Rust ``impl``) made a method of it; an
    ``impl`` is a container only, not a definition of its type."""
    rows = sorted(found, key=lambda d: (d[2], -d[3]))
    out: list[Def] = []
    open_defs: list[list[Any]] = []
    for name, kind, start, end, parent in rows:
        while open_defs and open_defs[-1][3] < start:
            open_defs.pop()
        enclosing = open_defs[-1] if open_defs else None
        if kind == "function":
            if not parent and enclosing is not None and enclosing[1] in _CONTAINERS:
                parent = enclosing[0]
            if parent:
                kind = "method"
        open_defs.append([name, kind, start, end, parent])
        if kind != "impl":
            # Interned (and kept so through marshal): a large repository repeats its names many times over.
            out.append((intern(name), _KINDS[kind], start, end, intern(parent)))
    return out


def cut_lines(root: Node, span: int) -> list[int]:
    """Lines a chunk may start at: each top-level node's first line (or that of the comments just above it),
    and the same inside any node longer than ``span`` lines, a few levels down."""
    cuts: set[int] = set()
    _cuts_of(root, span, cuts, 0)
    return sorted(cuts)


def _cuts_of(node: Node, span: int, cuts: set[int], depth: int) -> None:
    previous_comment_start: int | None = None
    previous_end = -1
    for child in node.named_children:
        start, end = child.start_point[0] + 1, child.end_point[0] + 1
        if "comment" in child.type:
            # A comment right below the previous one extends it; the cut goes above the first.
            if previous_comment_start is None or start > previous_end + 1:
                previous_comment_start = start
            previous_end = end
            continue
        attached = previous_comment_start is not None and start <= previous_end + 1
        cuts.add(previous_comment_start if attached and previous_comment_start is not None else start)
        previous_comment_start, previous_end = None, end
        if end - start + 1 > span and depth < 4:
            _cuts_of(child, span, cuts, depth + 1)
