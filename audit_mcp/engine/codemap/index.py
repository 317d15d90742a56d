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


class Index:
    """Definitions and modules of every mapped file."""

    def __init__(self, facts: Mapping[str, Facts], known: set[str]) -> None:
        self.facts = facts
        self.known = known
        self.family: dict[str, str] = {}
        self.by_name: dict[str, dict[str, list[Located]]] = defaultdict(lambda: defaultdict(list))
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
                names[d[0]].append((path, d))
            if package:
                self.packages[(fam, package)].append(path)
            if grammar == "go":
                go_files.append(path)
        self.go = modules.GoPackages(go_files, go_modules)
        self.rust = modules.RustModules(known)
        self.python = modules.python_modules(p for p, f in self.family.items() if f == "python")
        self.tails = modules.SuffixIndex(known)
        self._defs_of: dict[str, dict[str, list[Def]]] = {}

    def defs_of(self, path: str) -> dict[str, list[Def]]:
        """The definitions of one file by name (built on first use, kept for the next)."""
        found = self._defs_of.get(path)
        if found is None:
            found = defaultdict(list)
            facts = self.facts.get(path)
            for d in facts[2] if facts is not None else ():
                found[d[0]].append(d)
            self._defs_of[path] = found
        return found

    def lookup(self, path: str, name: str, parent: str = "") -> Def | None:
        """The definition ``name`` in ``path`` (a member of ``parent`` when given; top-level ones first)."""
        found = self.defs_of(path).get(name)
        if not found:
            return None
        if parent:
            return next((d for d in found if d[4] == parent), None)
        return next((d for d in found if not d[4]), found[0])

    def type_in(self, fam: str, package: str, name: str) -> str | None:
        """The file of ``package`` (a Java package, a C# or PHP namespace) that defines type ``name``."""
        for path in self.packages.get((fam, package), ()):
            if any(d[1] == "class" for d in self.defs_of(path).get(name, ())):
                return path
        return None

    def unique(self, fam: str, name: str, kinds: tuple[str, ...], exclude: str) -> Located | None:
        """The one definition of ``name`` of those ``kinds`` in the module system (outside ``exclude``), when
        exactly one file defines it."""
        found = [(p, d) for p, d in self.by_name[fam].get(name, ()) if d[1] in kinds]
        files = {p for p, _ in found}
        if len(files) != 1 or exclude in files:
            return None
        return found[0]
