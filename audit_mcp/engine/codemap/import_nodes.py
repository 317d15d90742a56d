"""What an import statement names, per language, as ``(spec, name, alias)`` triples.

``spec`` is what the statement points at (a module, package, namespace or path, as written), ``name`` the
symbol taken from it (``""`` for the whole module, ``"*"`` for all of it), ``alias`` the local name it is
bound to (``""`` when nothing is bound). ``resolve`` turns specs into files per language.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tree_sitter import Node

Triple = tuple[str, str, str]


def _text(node: Node | None) -> str:
    return "" if node is None or node.text is None else node.text.decode("utf-8", "replace")


def _python(node: Node) -> list[Triple]:
    out: list[Triple] = []
    if node.type == "import_statement":
        for child in node.children_by_field_name("name"):
            if child.type == "aliased_import":
                out.append((_text(child.child_by_field_name("name")), "", _text(child.child_by_field_name("alias"))))
            else:
                # ``import a.b`` binds ``a``; the resolver reads the chain ``a.b.x`` against the whole spec.
                out.append((_text(child), "", ""))
        return out
    module = _text(node.child_by_field_name("module_name")).replace(" ", "")
    if any(c.type == "wildcard_import" for c in node.children):
        return [(module, "*", "")]
    for child in node.children_by_field_name("name"):
        if child.type == "aliased_import":
            name = _text(child.child_by_field_name("name"))
            out.append((module, name, _text(child.child_by_field_name("alias"))))
        else:
            name = _text(child)
            out.append((module, name, name))
    return out


def _js(node: Node) -> list[Triple]:
    source = node.child_by_field_name("source")
    spec = _text(source)[1:-1] if source is not None else ""
    out: list[Triple] = []
    clause = next((c for c in node.children if c.type == "import_clause"), None)
    if clause is None:
        return [(spec, "", "")]
    for part in clause.children:
        if part.type == "identifier":
            out.append((spec, "default", _text(part)))
        elif part.type == "namespace_import":
            out.append((spec, "", _text(next((c for c in part.children if c.type == "identifier"), None))))
        elif part.type == "named_imports":
            for item in part.children:
                if item.type == "import_specifier":
                    name = _text(item.child_by_field_name("name"))
                    out.append((spec, name, _text(item.child_by_field_name("alias")) or name))
    return out or [(spec, "", "")]


def _go(node: Node) -> list[Triple]:
    path = _text(node.child_by_field_name("path")).strip('"`')
    alias = _text(node.child_by_field_name("name"))
    return [(path, "", "" if alias in ("_", ".") else alias)] if path else []


_DOTTED = re.compile(r"[\w.$]+")


def _jvm(node: Node) -> list[Triple]:
    """Java's and Kotlin's imports: a class, a package's everything, a static member, an alias (``as``)."""
    text = _text(node)
    words = text.replace(";", " ").split()
    static = "static" in words
    words = [w for w in words if w not in ("import", "static")]
    if not words:
        return []
    path = words[0]
    alias = words[2] if len(words) >= 3 and words[1] == "as" else ""
    if path.endswith(".*") or any(c.type in ("asterisk", "wildcard_import") for c in node.children):
        return [(path.removesuffix(".*").rstrip("."), "*", "")]
    head, _, last = path.rpartition(".")
    if static:
        return [(head, last, alias or last)]
    return [(path, "", alias or last)]


def _csharp(node: Node) -> list[Triple]:
    words = _text(node).replace(";", " ").replace("=", " = ").split()
    words = [w for w in words if w not in ("using", "static", "global")]
    if len(words) >= 3 and words[1] == "=":
        return [(words[2], "", words[0])]
    return [(words[0], "*", "")] if words else []


def _rust(node: Node) -> list[Triple]:
    argument = node.child_by_field_name("argument")
    out: list[Triple] = []
    if argument is not None:
        _rust_tree(argument, "", out)
    return out


def _rust_tree(node: Node, prefix: str, out: list[Triple], depth: int = 0) -> None:
    if depth > 16:  # a real import list is a few levels deep; a hostile one may nest without end
        return
    kind = node.type
    if kind in ("scoped_identifier", "identifier", "crate", "self", "super"):
        path = _join(prefix, _text(node))
        head, _, last = path.rpartition("::")
        out.append((head, last, last))
    elif kind == "use_as_clause":
        path = _join(prefix, _text(node.child_by_field_name("path")))
        head, _, last = path.rpartition("::")
        out.append((head, last, _text(node.child_by_field_name("alias"))))
    elif kind == "use_wildcard":
        out.append((_join(prefix, _text(node).removesuffix("::*").removesuffix("*")), "*", ""))
    elif kind == "scoped_use_list":
        base = _join(prefix, _text(node.child_by_field_name("path")))
        listed = node.child_by_field_name("list")
        if listed is not None:
            _rust_tree(listed, base, out, depth + 1)
    elif kind == "use_list":
        for child in node.named_children:
            _rust_tree(child, prefix, out, depth + 1)


def _join(prefix: str, path: str) -> str:
    path = "".join(path.split())
    return f"{prefix}::{path}" if prefix and path else prefix or path


_PHP_USE = re.compile(r"^use\s+(?:function\s+|const\s+)?(.*?);?\s*$", re.S)


def _php(node: Node) -> list[Triple]:
    match = _PHP_USE.match(_text(node).strip())
    if match is None:
        return []
    body = match[1]
    out: list[Triple] = []
    if "{" in body:
        prefix, _, group = body.partition("{")
        prefix = prefix.strip().rstrip("\\")
        items = [f"{prefix}\\{item.strip()}" for item in group.rstrip("}").split(",") if item.strip()]
    else:
        items = [item.strip() for item in body.split(",")]
    for item in items:
        name, _, alias = item.partition(" as ")
        name = name.strip().lstrip("\\")
        out.append((name, "", alias.strip() or name.rpartition("\\")[2]))
    return out


READERS: dict[str, Callable[[Node], list[Triple]]] = {
    "python": _python,
    "javascript": _js,
    "typescript": _js,
    "tsx": _js,
    "go": _go,
    "java": _jvm,
    "kotlin": _jvm,
    "csharp": _csharp,
    "rust": _rust,
    "php": _php,
}
