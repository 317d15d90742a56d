"""What the whole repository defines, indexed once for resolving every file's names: definitions by name
(per module system), by file, and by package or namespace; and where each import spec points.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Mapping

from audit_mcp.engine.codemap import modules
from audit_mcp.engine.codemap.extract import Def, Facts
from audit_mcp.engine.codemap.grammars import family

Located = tuple[str, Def]  # a definition and the file it is in
_SCAN_DEFS = 24  # up to this many definitions, a file's are searched rather than indexed


class Index:
    """Definitions and modules of every mapped file."""

    def __init__(self, facts: Mapping[str, Facts], known: set[str]) -> None:
        self.facts = facts
        self.known = known
        self.family: dict[str, str] = {}
        # Per module system, each name to the files that define it (a file once, however often).
        self.by_name: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        self.packages: dict[tuple[str, str], list[str]] = defaultdict(list)
        go_files: list[str] = []
        go_modules: dict[str, str] = {}
        for path, (grammar, package, defs, _) in facts.items():
            if grammar == "gomod":
                if package:
                    go_modules[posixpath.dirname(path)] = package
                continue
            fam = family(grammar)
            self.family[path] = fam
            names = self.by_name[fam]
            for d in defs:
                found = names[d[0]]
                if not found or found[-1] != path:
                    found.append(path)
            if package:
                self.packages[(fam, package)].append(path)
            if grammar == "go":
                go_files.append(path)
        self.go = modules.GoPackages(go_files, go_modules)
        self.rust = modules.RustModules(known)
        self.python = modules.python_modules(p for p, f in self.family.items() if f == "python")
        self.tails = modules.SuffixIndex(known)
        self._defs_of: dict[str, dict[str, list[Def]]] = {}
        self._identities: dict[str, dict[str, list[str]]] = {}

    def named(self, path: str, name: str) -> list[Def]:
        """The definitions called ``name`` in one file (a large file's are indexed on first use; a small one's
        are read in a pass, which costs less than keeping an index of every file)."""
        facts = self.facts.get(path)
        if facts is None:
            return []
        defs = facts[2]
        if len(defs) <= _SCAN_DEFS:
            return [d for d in defs if d[0] == name]
        found = self._defs_of.get(path)
        if found is None:
            found = defaultdict(list)
            for d in defs:
                found[d[0]].append(d)
            self._defs_of[path] = found
        return found.get(name, [])

    def lookup(self, path: str, name: str, parent: str = "") -> Def | None:
        """The definition ``name`` in ``path`` (a member of ``parent`` when given; top-level ones first)."""
        found = self.named(path, name)
        if not found:
            return None
        if parent:
            return next((d for d in found if d[4] == parent), None)
        return next((d for d in found if not d[4]), found[0])

    def type_in(self, fam: str, package: str, name: str) -> str | None:
        """The file of ``package`` (a Java package, a C# or PHP namespace) that defines type ``name``."""
        for path in self.packages.get((fam, package), ()):
            if any(d[1] == "class" for d in self.named(path, name)):
                return path
        return None

    def unique(self, fam: str, name: str, kinds: tuple[str, ...], exclude: str) -> Located | None:
        """The one definition of ``name`` of those ``kinds`` in the module system (outside ``exclude``), when
        exactly one file defines it."""
        found = [(p, d) for p in self.by_name[fam].get(name, ()) for d in self.named(p, name) if d[1] in kinds]
        files = {p for p, _ in found}
        if len(files) != 1 or exclude in files:
            return None
        return found[0]

    def named_like(self, fam: str, receiver: str) -> list[str]:
        """The files of a module system that go by ``receiver``'s name (``_identities``), indexed on first use."""
        found = self._identities.get(fam)
        if found is None:
            found = defaultdict(list)
            for path, f in self.family.items():
                if f == fam:
                    for identity in _identities(path, self.facts[path][2]):
                        found[identity].append(path)
            self._identities[fam] = found
        return found.get(norm(receiver), [])


# File names that stand for their folder: ``permission/index.js`` is the ``permission`` module.
_FOLDER_STEMS = frozenset({"index", "__init__", "mod", "main", "lib", "init", "module", "service"})


def norm(name: str) -> str:
    """A name as receivers, files and classes are compared: no case, no ``_``, ``-``, ``.`` or ``@``."""
    return name.replace("_", "").replace("-", "").replace(".", "").replace("@", "").lower()


def _identities(path: str, defs: list[Def]) -> set[str]:
    """The names a file goes by: its name (with and without its inner dots: ``user.service.ts`` is
    ``userservice`` and ``user``), its folder's for an ``index``-like file, and its top-level classes'
    (``ITokenService`` also as ``tokenService``, ``TokenServiceImpl`` as ``tokenService``)."""
    folder, base = posixpath.split(path)
    stem = base.split(".", 1)[0]
    names = {norm(base.rsplit(".", 1)[0]), norm(stem)}
    if stem.lower() in _FOLDER_STEMS and folder:
        names.add(norm(posixpath.basename(folder)))
    for d in defs:
        if d[1] == "class" and not d[4]:
            name = d[0]
            names.add(norm(name))
            if len(name) > 2 and name[0] == "I" and name[1].isupper():
                names.add(norm(name[1:]))
            if name.endswith("Impl"):
                names.add(norm(name[:-4]))
    return names
