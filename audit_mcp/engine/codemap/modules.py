"""Where an import points, per module system: a spec as written to the repository file (or Go package folder)
it names, by the language's own rules, and nothing when no file of the repository is meant (a standard
library, a third-party package).

- Python: ``a.b`` is ``a/b.py``, else ``a/b/__init__.py``, else the same under ``src/``; leading dots climb
  from the importing file's package.
- JavaScript and TypeScript: a relative spec as written, with an extension, as a folder's ``index``, or a
  ``.js`` name for its TypeScript source; ``@/x`` and ``~/x`` are ``src/x``.
- Go: an import path inside a ``go.mod`` module is the folder under it; without one, the folder whose path
  ends the import path (two segments at least).
- Java, Kotlin: the file declaring the type in that package, else ``a/b/C.java`` (or ``.kt``) by path;
  C#: the files declaring the namespace; PHP: the file declaring the class in that namespace, else the path
  ending ``A/B/C.php``.
- Rust: ``crate::``, ``super::`` and ``self::`` paths from the crate's ``src`` folder, a module being
  ``name.rs`` or ``name/mod.rs``; ``mod name;`` beside the declaring file.
- C and C++: an ``#include "x.h"`` beside the including file, else the one file whose path ends ``/x.h``.
- Ruby: ``require_relative`` beside the file; ``require 'a/b'`` the one file ending ``a/b.rb``.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Iterable, Mapping

_JS_EXTS = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".mts", ".cts", ".vue", ".svelte")


def python_modules(known: Iterable[str]) -> dict[str, str]:
    """The Python module stems of ``known`` files, each to the file an import of it names: ``a/b`` is
    ``a/b.py``, else ``a/b/__init__.py``, else the same under ``src/``, in that order of preference."""
    best: dict[str, tuple[int, str]] = {}
    for path in known:
        if not path.endswith((".py", ".pyi")):
            continue
        stem = path.rsplit(".", 1)[0]
        stem, rank = (stem[:-9], 1) if stem.endswith("/__init__") or stem == "__init__" else (stem, 0)
        spellings = [(stem, rank)]
        if stem.startswith("src/"):
            spellings.append((stem[4:], rank + 2))
        for name, order in spellings:
            if name and (name not in best or best[name][0] > order):
                best[name] = (order, path)
    return {name: path for name, (_, path) in best.items()}


def python_spec(importer: str, spec: str) -> str:
    """The module stem (``a/b``) of a Python import spec, leading dots climbing from ``importer``'s package."""
    dots = len(spec) - len(spec.lstrip("."))
    stem = spec[dots:].replace(".", "/")
    if not dots:
        return stem
    base = posixpath.dirname(importer)
    for _ in range(dots - 1):
        base = posixpath.dirname(base)
    return f"{base}/{stem}".strip("/") if stem else base


def js_resolve(importer: str, spec: str, known: Mapping[str, object] | set[str]) -> str | None:
    """The file a JavaScript or TypeScript ``spec`` names from ``importer``, if it is one of ``known``."""
    if spec.startswith(("@/", "~/")):
        base = "src/" + spec[2:]
    elif spec.startswith("."):
        base = posixpath.normpath(posixpath.join(posixpath.dirname(importer), spec))
    else:
        return None
    if base in known:
        return base
    for ext in _JS_EXTS:
        if (candidate := base + ext) in known:
            return candidate
    for ext in _JS_EXTS:
        if (candidate := f"{base}/index{ext}") in known:
            return candidate
    if base.endswith(".js"):
        for candidate in (base[:-3] + ".ts", base[:-3] + ".tsx"):
            if candidate in known:
                return candidate
    return None


class SuffixIndex:
    """Files by their names, for specs that name a file by the end of its path (``b.rb``, ``a/b.rb``)."""

    def __init__(self, paths: Iterable[str]) -> None:
        self._by: dict[str, list[str]] = defaultdict(list)
        for path in paths:
            self._by[path.rpartition("/")[2]].append(path)

    def one(self, tail: str, near: str = "") -> str | None:
        """The file ending with ``tail``: the only one, else the one sharing the most leading folders with
        ``near`` when no other shares as many; ``None`` otherwise."""
        tail = tail.strip("/")
        ending = "/" + tail
        found = [p for p in self._by.get(tail.rpartition("/")[2], ()) if p == tail or p.endswith(ending)]
        if len(found) == 1:
            return found[0]
        if not found or not near:
            return None
        ranked = sorted(found, key=lambda p: -_shared(p, near))
        if _shared(ranked[0], near) > _shared(ranked[1], near):
            return ranked[0]
        return None


def _shared(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.split("/")[:-1], b.split("/")[:-1], strict=False):
        if x != y:
            break
        n += 1
    return n


def beside(
    importer: str, spec: str, known: Mapping[str, object] | set[str], exts: tuple[str, ...] = ("",)
) -> str | None:
    """``spec`` relative to the importer's folder, with one of ``exts`` added, if it is a known file."""
    base = posixpath.normpath(posixpath.join(posixpath.dirname(importer), spec.lstrip("/")))
    for ext in exts:
        if (candidate := base + ext) in known:
            return candidate
    return None


class GoPackages:
    """Go packages (folders of ``.go`` files) and the modules their ``go.mod`` files declare."""

    def __init__(self, go_files: Iterable[str], modules: Mapping[str, str]) -> None:
        self.folders: dict[str, list[str]] = defaultdict(list)
        for path in go_files:
            self.folders[posixpath.dirname(path)].append(path)
        # Longest module path first, so a nested module wins over the one around it.
        self.modules = sorted(modules.items(), key=lambda kv: -len(kv[1]))
        self._tails = SuffixIndex(self.folders)

    def folder(self, import_path: str) -> str | None:
        for folder, module in self.modules:
            if import_path == module or import_path.startswith(module + "/"):
                rel = import_path[len(module) + 1 :]
                candidate = posixpath.join(folder, rel).strip("/") if rel else folder
                return candidate if candidate in self.folders else None
        if import_path.count("/") >= 1 and not self.modules:
            # No go.mod: the folder ending the import path, two segments at least (``net/http`` is not ``http``).
            tail = "/".join(import_path.split("/")[-2:])
            return self._tails.one(tail)
        return None


class RustModules:
    """Rust module files: a crate's root (``lib.rs`` or ``main.rs``) and what ``crate::a::b`` names."""

    def __init__(self, known: set[str]) -> None:
        self.known = known

    def module_dir(self, path: str) -> str:
        """The folder a file's submodules live in: its own for ``mod.rs``, ``lib.rs`` and ``main.rs``, else the
        folder named after it."""
        folder, name = posixpath.split(path)
        return folder if name in ("mod.rs", "lib.rs", "main.rs") else posixpath.join(folder, name[:-3])

    def crate_dir(self, path: str) -> str | None:
        folder = posixpath.dirname(path)
        while True:
            if posixpath.join(folder, "lib.rs") in self.known or posixpath.join(folder, "main.rs") in self.known:
                return folder
            if not folder:
                return None
            folder = posixpath.dirname(folder)

    def file(self, folder: str, name: str) -> str | None:
        for candidate in (posixpath.join(folder, name + ".rs"), posixpath.join(folder, name, "mod.rs")):
            if candidate in self.known:
                return candidate
        return None

    def resolve(self, importer: str, path: str) -> tuple[str, list[str]] | None:
        """The module file a ``::`` path reaches from ``importer``, and the segments left after it."""
        parts = [p for p in path.split("::") if p]
        if not parts:
            return None
        if parts[0] == "crate":
            base = self.crate_dir(importer)
            current: str | None = None
            for candidate in ("lib.rs", "main.rs"):
                if base is not None and posixpath.join(base, candidate) in self.known:
                    current = posixpath.join(base, candidate)
                    break
            parts = parts[1:]
        elif parts[0] in ("self", "super"):
            current = importer
            while parts and parts[0] in ("self", "super"):
                if parts[0] == "super":
                    folder = self.module_dir(current)
                    parent = posixpath.dirname(folder)
                    up = self.file(posixpath.dirname(parent), posixpath.basename(parent)) if parent else None
                    current = up or next(
                        (
                            posixpath.join(parent, n)
                            for n in ("mod.rs", "lib.rs", "main.rs")
                            if posixpath.join(parent, n) in self.known
                        ),
                        current,
                    )
                parts = parts[1:]
        else:
            current = self.file(self.module_dir(importer), parts[0])
            if current is None:
                return None
            parts = parts[1:]
        if current is None:
            return None
        while parts and (deeper := self.file(self.module_dir(current), parts[0])) is not None:
            current = deeper
            parts = parts[1:]
        return current, parts
