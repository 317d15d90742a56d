"""Resolving every file's names to the definitions of other files: the map's edges.

A chain (``views.login_view``, ``self.apos.permission.can``, ``auth.IsAdmin``) is tried, in order:

1. through what the file imports (``bindings``): the module, definition or package its first name is bound to;
2. through the language's own scope: a Go package's other files, a Java, Kotlin, C# or PHP package's or
   namespace's types, and in C, C++, Ruby and languages without a query of their own, a name defined in one
   file only (their names are global);
3. for a call ``x.name()`` on a receiver none of that explains: the definition of ``name`` in the one file
   named after the receiver (its file or folder name, or its class: ``permission`` is ``permission/index.js``,
   ``tokenService`` is ``TokenService``), else the one file that defines ``name`` at all, unless the name is
   too common to tell (``common_names``).

Anything else (a local name, a builtin, a library) leads nowhere and is dropped.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Iterator, Mapping

from audit_mcp.engine.codemap import links
from audit_mcp.engine.codemap.bindings import Binding, Bound, bind
from audit_mcp.engine.codemap.common_names import COMMON, SELF
from audit_mcp.engine.codemap.extract import Def, Facts, unpack
from audit_mcp.engine.codemap.index import Index
from audit_mcp.engine.codemap.model import CodeMap, Edge, Entry, Link

_CALLABLE = ("function", "method")
_ANY = ("function", "method", "class")
_GLOBAL_FAMILIES = frozenset({"c", "ruby"})
_PACKAGE_FAMILIES = frozenset({"jvm", "csharp", "php"})
Target = tuple[str, Def | None]


def build(facts: Mapping[str, Facts], known: set[str]) -> CodeMap:
    """The map of a repository: ``facts`` of every mapped file, ``known`` every file in scope."""
    index = Index(facts, known)
    resolver = _Resolver(index)
    edges: list[Edge] = []
    entries: list[Entry] = []
    for path in sorted(facts):
        if facts[path][0] == "gomod":
            continue
        # One file's links at a time, each edge encoded once its file is done.
        found: dict[str, dict[tuple[str, str], Link]] = defaultdict(dict)
        for target, link in resolver.file(path):
            by_name = found[target]
            seen = by_name.get(link[:2])
            # The same thing named again: counted with its first link.
            by_name[link[:2]] = link if seen is None else (*seen[:5], seen[5] + link[5])
        for target in sorted(found):
            edges.append(Edge.of(path, target, tuple(link for _, link in sorted(found[target].items()))))
        entries += resolver.entries
    return CodeMap(edges, sorted(set(entries), key=lambda e: (e.path, e.line, e.symbol)), len(index.family))


class _Resolver:
    def __init__(self, index: Index) -> None:
        self.index = index
        self.entries: list[Entry] = []
        self._bound: dict[str, Bound] = {}

    def bound(self, path: str) -> Bound:
        """A file's imports, resolved (kept: a re-export is looked up through the file that re-exports)."""
        found = self._bound.get(path)
        if found is None:
            grammar, _, _, rest = self.index.facts[path]
            found = bind(self.index, path, grammar, unpack(rest)[0])
            self._bound[path] = found
        return found

    def file(self, path: str) -> Iterator[tuple[str, Link]]:
        """Every link from ``path`` to another file."""
        index = self.index
        grammar, package, defs, rest = index.facts[path]
        fam = index.family[path]
        imports, refs, strings = unpack(rest)
        bound = bind(index, path, grammar, imports)
        self.entries = [Entry(path, d[2], d[0], "a main function") for d in defs if _is_main(d, grammar)]
        for target, spec, line in bound.reached:
            yield target, ("import", spec, line, 0, 0, 1)
        local = {d[0] for d in defs}
        by_line: dict[int, list[Target]] = defaultdict(list)
        for chain, how, line, count in refs:
            found = self.chain(path, fam, package, bound, local, chain, how)
            if found is None:
                if chain in local:
                    by_line[line].append((path, index.lookup(path, chain)))
                continue
            target, d, rule = found
            by_line[line].append((target, d))
            if target != path:
                name = d[0] if d is not None else chain
                start, end = (d[2], d[3]) if d is not None else (0, 0)
                yield target, (rule, name, line, start, end, count)
        for reached, link, entry in links.strings(index, path, fam, defs, strings, by_line):
            if entry is not None:
                self.entries.append(entry)
            if reached is not None and link is not None and reached != path:
                yield reached, link

    def chain(
        self, path: str, fam: str, package: str, bound: Bound, local: set[str], chain: str, how: str
    ) -> tuple[str, Def | None, str] | None:
        segs = chain.lstrip(":").split(".")
        root = segs[0]
        if not root:
            return None
        binding = bound.names.get(root)
        if binding is not None:
            found = self._through(binding, segs[1:])
            return None if found is None else (*found, how)
        if bound.dotted and len(segs) > 1:
            for k in range(len(segs) - 1, 0, -1):
                module = bound.dotted.get(".".join(segs[:k]))
                if module is not None:
                    found = self._through(("module", module), segs[k:])
                    return None if found is None else (*found, how)
        if root in local or root in bound.external:
            return None
        found = self._scope(path, fam, package, bound, segs)
        if found is not None:
            return (*found, how)
        if len(segs) >= 2:
            # A call by its receiver's name or a name defined once; a method passed as a value (a route's
            # handler, a callback) by its receiver's name only.
            return self._by_name(path, fam, segs, unique=how == "call")
        if chain.startswith(":") and len(segs) == 1:  # a Ruby symbol naming a method (``before_action :auth``)
            return self._by_name(path, fam, ["", root])
        return None

    def _through(self, binding: Binding, rest: list[str], depth: int = 0) -> Target | None:
        index = self.index
        kind = binding[0]
        if kind == "module":
            return self._member(binding[1], rest)
        if kind == "symbol":
            target, name = binding[1], binding[2]
            if index.lookup(target, name) is not None:
                return self._member(target, [name, *rest])
            # Re-exported (``from .models import Product`` in a package's ``__init__``): a few steps further.
            again = self.bound(target).names.get(name) if target in index.facts and depth < 3 else None
            if again is not None and not (again[0] == "symbol" and again[1] == target):
                return self._through(again, rest, depth + 1)
            return target, None
        if kind == "folder" and rest:
            for file in index.go.folders.get(binding[1], ()):
                if index.lookup(file, rest[0]) is not None:
                    return self._member(file, rest)
        return None

    def _member(self, target: str, segs: list[str]) -> Target:
        """``segs`` looked up in ``target``: a definition, or a class's member."""
        index = self.index
        if not segs:
            return target, None
        d = index.lookup(target, segs[0])
        if d is None:
            return target, None
        if len(segs) > 1 and d[1] == "class":
            member = index.lookup(target, segs[1], parent=d[0])
            if member is not None:
                return target, member
        return target, d

    def _scope(self, path: str, fam: str, package: str, bound: Bound, segs: list[str]) -> Target | None:
        """A name the language's own scope gives the file, without an import."""
        index = self.index
        root = segs[0]
        for star in bound.stars:
            if star[0] == "module" and index.lookup(star[1], root) is not None:
                return self._member(star[1], segs)
            if star[0] == "package" and (target := index.type_in(star[1], star[2], root)) is not None:
                return self._member(target, segs)
        if fam == "go":
            for file in index.go.folders.get(posixpath.dirname(path), ()):
                if file != path and index.lookup(file, root) is not None and index.facts[file][1] == package:
                    return self._member(file, segs)
            return None
        if fam in _PACKAGE_FAMILIES and root[:1].isupper():
            target = index.type_in(fam, package, root) if package else None
            if target is not None and target != path:
                return self._member(target, segs)
            found = index.unique(fam, root, ("class",), path)
            return None if found is None else self._member(found[0], segs)
        if fam in _GLOBAL_FAMILIES or fam not in _KNOWN_FAMILIES:
            # Global names: the last capitalised segment is a class or module (Ruby's ``Auth::Policy.check!``).
            at = max((i for i, s in enumerate(segs[:-1]) if s[:1].isupper()), default=0) if len(segs) > 1 else 0
            found = index.unique(fam, segs[at], _ANY, path)
            return None if found is None else self._member(found[0], segs[at:])
        return None

    def _by_name(
        self, path: str, fam: str, segs: list[str], *, unique: bool = True
    ) -> tuple[str, Def | None, str] | None:
        """A method called on a receiver nothing else explains: by the receiver's name, else (``unique``) by a
        name defined once (and not too common to tell)."""
        name, receiver = segs[-1], segs[-2]
        if len(segs) == 2 and receiver in SELF:
            return None
        index = self.index
        if receiver and receiver.isidentifier():
            files = [f for f in index.named_like(fam, receiver) if f != path and _callable(index, f, name)]
            if len(files) == 1:
                return files[0], index.lookup(files[0], name), "name"
        if not unique or name in COMMON or len(name) < 4 or name.startswith("__"):
            return None
        found = index.unique(fam, name, _CALLABLE, path)
        return None if found is None else (found[0], found[1], "name")


_KNOWN_FAMILIES = frozenset({"python", "js", "go", "jvm", "csharp", "php", "rust", "c", "ruby"})


def _callable(index: Index, path: str, name: str) -> bool:
    return any(d[1] in _CALLABLE for d in index.named(path, name))


def _is_main(d: Def, grammar: str) -> bool:
    return d[0] in ("main", "Main") and d[1] in _CALLABLE and grammar not in ("python", "javascript", "typescript")
