"""The import edges that are cheap to read: what a Python or JavaScript file names as imports, found with
plain string search and regular expressions at intake, and resolved against the repository's files once all
are known (fast and approximate: a missed edge only loses a neighbour in packing)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Container, Iterable

_PY_IMPORT = re.compile(r"^\s*import\s+([\w.]+(?:\s*,\s*[\w.]+)*)", re.M)
_PY_FROM = re.compile(r"^\s*from\s+(\.*)([\w.]*)\s+import\s+([\w*, ()]+)", re.M)
_JS_SPEC = re.compile(
    r"""(?:import\s[^'"]*?from\s*|import\s*\(?\s*|require\(\s*|export\s[^'"]*?from\s*)['"]([^'"]+)['"]"""
)
_JS_KEYWORDS = ("import", "require(", "export")
_JS_LANGUAGES = frozenset({"javascript", "typescript", "vue", "svelte"})
_JS_EXTS = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".mts", ".cts")


def reads_imports(language: str) -> bool:
    """Whether ``import_candidates`` reads anything for ``language``."""
    return language == "python" or language in _JS_LANGUAGES


def _python_candidates(package: str, data: bytes) -> list[str]:
    """The module stems the import lines of ``data`` name; ``package`` is the importing file's directory.

    A line can import when ``import`` or ``from`` comes first after blanks, followed by a blank, and the
    word ``import`` is on it; such lines are found with plain byte search, and only they are decoded."""
    out: list[str] = []
    find, rfind, start, size = data.find, data.rfind, 0, len(data)
    while (at := find(b"import", start)) != -1:
        begin = rfind(b"\n", 0, at) + 1
        end = find(b"\n", at)
        end = size if end == -1 else end
        start = end + 1
        stripped = data[begin:end].lstrip(b" \t")
        if stripped[:6] == b"import":
            if stripped[6:7] in (b" ", b"\t") and (found := _PY_IMPORT.match(stripped.decode("utf-8", "replace"))):
                out.extend(name.strip().replace(".", "/") for name in found.group(1).split(","))
        elif (
            stripped[:4] == b"from"
            and stripped[4:5] in (b" ", b"\t")
            and (match := _PY_FROM.match(stripped.decode("utf-8", "replace"))) is not None
        ):
            _from_targets(package, match, out)
    return out


def _from_targets(package: str, match: re.Match[str], out: list[str]) -> None:
    """Append the stems a ``from … import …`` line (``match``, of ``_PY_FROM``) names to ``out``."""
    dots, module, names = match.group(1), match.group(2), match.group(3)
    if dots:
        base = package
        for _ in range(len(dots) - 1):
            base = posixpath.dirname(base)
        stem = posixpath.join(base, module.replace(".", "/")) if module else base
    else:
        stem = module.replace(".", "/")
    # posixpath.join(stem, name) for a name without a slash, spelled out: this runs on every import line.
    prefix = stem + "/" if stem and stem[-1] != "/" else stem
    out.append(stem)
    for name in names.replace("(", " ").replace(")", " ").split(","):
        name = name.strip().split(" ")[0]
        if name and name != "*":
            out.append(prefix + name)


def _js_specs(text: str) -> Iterable[str]:
    """What ``_JS_SPEC.finditer`` finds, trying the pattern only where one of its keywords starts."""
    starts = sorted({at for word in _JS_KEYWORDS for at in _all(text, word)})
    done = 0
    for at in starts:
        if at < done:
            continue
        if (match := _JS_SPEC.match(text, at)) is not None:
            done = match.end()
            yield match.group(1)


def _all(text: str, word: str) -> Iterable[int]:
    at = text.find(word)
    while at != -1:
        yield at
        at = text.find(word, at + 1)


def _python_modules(known: Iterable[str]) -> dict[str, str]:
    """The Python module stems of ``known`` files, each to the file an import of it names: ``a/b`` is
    ``a/b.py``, else ``a/b/__init__.py``, else the same under ``src/``, in that order of preference."""
    best: dict[str, tuple[int, str]] = {}
    for path in known:
        if not path.endswith(".py"):
            continue
        stem, rank = (path[:-12], 1) if path.endswith("/__init__.py") else (path[:-3], 0)
        spellings = [(stem, rank)]
        if stem.startswith("src/"):
            spellings.append((stem[4:], rank + 2))
        for name, order in spellings:
            if name and (name not in best or best[name][0] > order):
                best[name] = (order, path)
    return {name: path for name, (_, path) in best.items()}


def _js_resolve(path: str, spec: str, known: Container[str]) -> str | None:
    if not spec.startswith("."):
        return None
    base = posixpath.normpath(posixpath.join(posixpath.dirname(path), spec))
    candidates = [base] + [base + ext for ext in _JS_EXTS] + [f"{base}/index{ext}" for ext in _JS_EXTS]
    if base.endswith(".js"):
        candidates += [base[:-3] + ".ts", base[:-3] + ".tsx"]
    for candidate in candidates:
        if candidate in known:
            return candidate
    return None


def import_candidates(path: str, language: str, data: bytes) -> list[str]:
    """What ``path`` names as imports (Python module stems, JavaScript specifiers), unresolved: read once
    at intake, resolved by ``resolve_imports`` when every file of the repository is known."""
    if language == "python":
        return _python_candidates(posixpath.dirname(path), data)
    if language in _JS_LANGUAGES and any(word.encode() in data for word in _JS_KEYWORDS):
        return list(_js_specs(data.decode("utf-8", errors="replace")))
    return []


class ImportResolver:
    """What ``import_candidates`` name, resolved against the files of one repository (``known``); the
    Python module stems are indexed once, so each import costs one lookup."""

    def __init__(self, known: Collection[str]) -> None:
        self.known = known
        self.modules = _python_modules(known)

    def resolve(self, path: str, language: str, candidates: Iterable[str]) -> set[str]:
        """The repository files among ``candidates``, other than ``path``."""
        found: set[str] = set()
        modules, known = self.modules, self.known
        for name in candidates:
            target = modules.get(name.strip("/")) if language == "python" else _js_resolve(path, name, known)
            if target and target != path:
                found.add(target)
        return found


def import_edges(path: str, language: str, text: str, known: Collection[str]) -> set[str]:
    """Repo files that ``path`` imports, read with plain string search and regular expressions (fast,
    approximate)."""
    return ImportResolver(known).resolve(
        path, language, import_candidates(path, language, text.encode("utf-8", "surrogatepass"))
    )
