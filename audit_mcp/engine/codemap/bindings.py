"""What a file's imports bind: each import to the file (or Go package folder) it reaches, and the local name
it binds to a module, a definition or a whole package.

A binding is one of ``("module", file)``, ``("symbol", file, name)``, ``("folder", folder)`` (a Go
package) or ``("package", family, name)`` (a Java or C# package or namespace, for ``import a.b.*``).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from audit_mcp.engine.codemap import modules
from audit_mcp.engine.codemap.extract import Import
from audit_mcp.engine.codemap.index import Index

Binding = tuple[str, ...]


@dataclass
class Bound:
    """A file's imports, resolved."""

    names: dict[str, Binding] = field(default_factory=dict)
    reached: list[tuple[str, str, int]] = field(default_factory=list)  # (file, spec, line) each import reaches
    dotted: dict[str, str] = field(default_factory=dict)  # Python ``import a.b``: ``a.b`` -> its file
    stars: list[Binding] = field(default_factory=list)  # modules and packages imported whole (``*``)
    # Names bound to something outside the repository (a library): a chain on one leads nowhere.
    external: set[str] = field(default_factory=set)


def bind(index: Index, path: str, grammar: str, imports: list[Import]) -> Bound:
    out = Bound()
    reader = _READERS.get(grammar)
    if reader is None:
        return out
    for spec, name, alias, line in imports:
        before = len(out.reached)
        reader(index, path, spec, name, alias, line, out)
        if len(out.reached) == before and name != "*":
            out.external.add(alias or spec.split(".", 1)[0])
    out.external -= out.names.keys()
    return out


def _reach(out: Bound, target: str | None, spec: str, line: int, path: str) -> bool:
    if target is None or target == path:
        return False
    out.reached.append((target, spec, line))
    return True


def _python(index: Index, path: str, spec: str, name: str, alias: str, line: int, out: Bound) -> None:
    stem = modules.python_spec(path, spec)
    if not name:
        target = index.python.get(stem)
        if _reach(out, target, spec, line, path) and target is not None:
            if alias:
                out.names[alias] = ("module", target)
            else:
                out.dotted[spec] = target
        return
    if name == "*":
        target = index.python.get(stem)
        if _reach(out, target, spec, line, path) and target is not None:
            out.stars.append(("module", target))
        return
    sub = index.python.get(f"{stem}/{name}" if stem else name)
    if sub is not None:
        if _reach(out, sub, f"{spec}.{name}", line, path):
            out.names[alias] = ("module", sub)
        return
    target = index.python.get(stem)
    if _reach(out, target, spec, line, path) and target is not None:
        out.names[alias] = ("symbol", target, name)


def _js(index: Index, path: str, spec: str, name: str, alias: str, line: int, out: Bound) -> None:
    target = modules.js_resolve(path, spec, index.known)
    if not _reach(out, target, spec, line, path) or target is None or not alias:
        return
    if not name:
        out.names[alias] = ("module", target)
    elif name == "default":
        # The default export's own name is unknown here: a definition named like the binding, else the file.
        out.names[alias] = ("symbol", target, alias)
    else:
        out.names[alias] = ("symbol", target, name)


def _go(index: Index, path: str, spec: str, name: str, alias: str, line: int, out: Bound) -> None:
    folder = index.go.folder(spec)
    if folder is None or folder == posixpath.dirname(path):
        return
    # Go has no unused imports: the package's files are reached through the names used from it.
    files = index.go.folders[folder]
    declared = index.facts[files[0]][1] if files else ""
    out.names[alias or declared or spec.rsplit("/", 1)[-1]] = ("folder", folder)


def _jvm(index: Index, path: str, spec: str, name: str, alias: str, line: int, out: Bound) -> None:
    fam = index.family.get(path, "jvm")
    if name == "*":
        # A wildcard names a package (or a class's members): its files are reached through what is used.
        out.stars.append(("package", fam, spec))
        target = _jvm_type(index, fam, spec)
        if target is not None:
            out.stars.append(("module", target))
        return
    owner = spec if name else spec.rpartition(".")[0]
    cls = spec.rpartition(".")[2]
    target = _jvm_type(index, fam, spec) if not name else _jvm_type(index, fam, owner)
    if target is None and not name:
        # Kotlin imports a top-level function by its package: the package file that defines it.
        target = next((p for p in index.packages.get((fam, owner), ()) if index.lookup(p, cls)), None)
    if _reach(out, target, spec, line, path) and target is not None:
        out.names[alias or name or cls] = ("symbol", target, name or cls)


def _jvm_type(index: Index, fam: str, dotted: str) -> str | None:
    package, _, cls = dotted.rpartition(".")
    found = index.type_in(fam, package, cls)
    if found is None:
        for ext in (".java", ".kt", ".scala", ".groovy"):
            if (found := index.tails.one(dotted.replace(".", "/") + ext)) is not None:
                break
    return found


def _csharp(index: Index, path: str, spec: str, name: str, alias: str, line: int, out: Bound) -> None:
    if name == "*":
        out.stars.append(("package", "csharp", spec))
        return
    target = _jvm_type(index, "csharp", spec)
    if _reach(out, target, spec, line, path) and target is not None:
        out.names[alias] = ("symbol", target, spec.rpartition(".")[2])


def _php(index: Index, path: str, spec: str, name: str, alias: str, line: int, out: Bound) -> None:
    if spec.startswith("."):
        _reach(out, modules.beside(path, spec, index.known), spec, line, path)
        return
    dotted = spec.replace("\\", ".")
    package, _, cls = dotted.rpartition(".")
    target = index.type_in("php", package, cls) or index.tails.one(spec.replace("\\", "/") + ".php", near=path)
    if target is None and "/" in spec:
        target = index.tails.one(spec, near=path)
    if _reach(out, target, spec, line, path) and target is not None and alias:
        out.names[alias] = ("symbol", target, cls)


def _rust(index: Index, path: str, spec: str, name: str, alias: str, line: int, out: Bound) -> None:
    if spec == "mod":
        target = index.rust.file(index.rust.module_dir(path), name)
        if _reach(out, target, f"mod {name}", line, path) and target is not None:
            out.names[name] = ("module", target)
        return
    if name == "*":
        found = index.rust.resolve(path, spec)
        if found is not None and not found[1] and _reach(out, found[0], spec, line, path):
            out.stars.append(("module", found[0]))
        return
    found = index.rust.resolve(path, f"{spec}::{name}" if spec else name)
    if found is None:
        return
    target, rest = found
    if not _reach(out, target, f"{spec}::{name}", line, path) or not alias:
        return
    out.names[alias] = ("module", target) if not rest else ("symbol", target, rest[-1])


def _c(index: Index, path: str, spec: str, name: str, alias: str, line: int, out: Bound) -> None:
    target = modules.beside(path, spec, index.known) or index.tails.one(spec, near=path)
    _reach(out, target, spec, line, path)


def _ruby(index: Index, path: str, spec: str, name: str, alias: str, line: int, out: Bound) -> None:
    if spec.startswith("."):
        target = modules.beside(path, spec, index.known, ("", ".rb"))
    else:
        target = index.tails.one(spec + ".rb", near=path) if "/" in spec else index.tails.one(f"lib/{spec}.rb")
    _reach(out, target, spec, line, path)


_READERS = {
    "python": _python,
    "javascript": _js,
    "typescript": _js,
    "tsx": _js,
    "go": _go,
    "java": _jvm,
    "kotlin": _jvm,
    "csharp": _csharp,
    "php": _php,
    "rust": _rust,
    "c": _c,
    "cpp": _c,
    "ruby": _ruby,
}
