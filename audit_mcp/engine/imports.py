"""The import edges that are cheap to read: what a Python or JavaScript file names as imports, found with
plain string search and regular expressions at intake, and resolved against the repository's files once all
are known (fast and approximate: a missed edge only loses a neighbour in packing)."""

from __future__ import annotations

import itertools
import posixpath
import re
from collections.abc import Collection, Container, Iterable, Iterator

# An import line, from its start: ``import a.b, c`` or ``from .a import b as c, d`` after spaces and tabs.
# ``[^\S\n]`` is a blank other than the newline, so a match never runs past its line.
_PY_LINE_BODY = (
    r"[ \t]*(?:import[ \t][^\S\n]*([\w.]+(?:[^\S\n]*,[^\S\n]*[\w.]+)*)"
    r"|from[ \t][^\S\n]*(\.*)([\w.]*)[^\S\n]+import[^\S\n]+([\w*, ()]+))"
)
_PY_LINE = re.compile(_PY_LINE_BODY)
# An import line from the newline before it: a literal the regex engine skips to, trying each line once.
_PY_NEXT_LINE = re.compile("\n" + _PY_LINE_BODY)
# Scanning every line costs about as much as 400 characters per line that has the word ``import`` (found
# with plain search, then matched alone); the cheaper of the two is taken for each file.
_SCAN_CHARS_PER_WORD = 400
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

    The text is decoded once: a newline is never part of a multi-byte sequence nor of a replacement, so
    each line reads as if decoded alone."""
    out: list[str] = []
    if b"import" not in data:
        return out
    text = data.decode("utf-8", "replace")
    first = text.find("import")
    begin = text.rfind("\n", 0, first) + 1  # the first line with the word; no line without it can import
    end = text.find("\n", text.rfind("import"))
    end = len(text) if end == -1 else end
    matches: Iterable[re.Match[str]]
    if end - begin <= _SCAN_CHARS_PER_WORD * text.count("import", begin, end):
        matches = _PY_NEXT_LINE.finditer(text, begin - 1 if begin else 0, end)
        if not begin and (opening := _PY_LINE.match(text)) is not None:
            matches = itertools.chain((opening,), matches)
    else:
        matches = _lines_with_the_word(text, first)
    append = out.append
    for match in matches:
        imported, dots, module, names = match.groups()
        if imported is not None:
            if "," in imported:
                out.extend([name.strip().replace(".", "/") for name in imported.split(",")])
            else:  # a single name has no blank around it
                append(imported.replace(".", "/"))
            continue
        stem = module.replace(".", "/")
        if dots:
            base = package
            for _ in range(len(dots) - 1):
                base = _dirname(base)
            # posixpath.join(base, stem) spelled out: ``stem`` never starts with a slash.
            stem = (f"{base}/{stem}" if base and base[-1] != "/" else base + stem) if stem else base
        append(stem)
        prefix = stem + "/" if stem and stem[-1] != "/" else stem
        if "(" in names or ")" in names:
            names = names.replace("(", " ").replace(")", " ")
        for name in names.split(","):
            name = name.strip().split(" ")[0]
            if name and name != "*":
                append(prefix + name)
    return out


def _lines_with_the_word(text: str, at: int) -> Iterator[re.Match[str]]:
    """The import lines among those holding the word ``import``, the first at ``at``."""
    find, rfind, match_at = text.find, text.rfind, _PY_LINE.match
    while at != -1:
        if (match := match_at(text, rfind("\n", 0, at) + 1)) is not None:
            yield match
        end = find("\n", at)
        at = -1 if end == -1 else find("import", end)


def _dirname(path: str) -> str:
    """``posixpath.dirname(path)``, with a cheaper common case (this runs for every relative import)."""
    cut = path.rfind("/")
    if cut > 0 and path[cut - 1] != "/":
        return path[:cut]
    return posixpath.dirname(path)


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
        return _python_candidates(_dirname(path), data)
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
