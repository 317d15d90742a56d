"""The import edges that are cheap to read: what a Python or JavaScript file names as imports, found with
plain string search and regular expressions at intake, and resolved against the repository's files once all
are known (fast and approximate: a missed edge only loses a neighbour in packing)."""

from __future__ import annotations

import itertools
import posixpath
import re
from collections.abc import Collection, Container, Iterable, Iterator

# An import line, from its start: ``import a.b, c`` or ``from .a import b as c, d`` after spaces and tabs.
# ``_`` stands for a blank other than the newline, so a match never runs past its line, and ``W`` for a word
# character; both are spelled out for text that is all ASCII, where they are plain tables (the blanks are the
# ASCII ones ``str.isspace`` knows, the word characters letters, digits and ``_``), much cheaper to try.
_PY_LINE_FORM = r"[ \t]*(?:import[ \t]_*([W.]+(?:_*,_*[W.]+)*)|from[ \t]_*(\.*)([W.]*)_+import_+([W*, ()]+))"
_PY_LINE_TEXT = _PY_LINE_FORM.replace("_", r"[^\S\n]").replace("W", r"\w")
_PY_LINE_ASCII = _PY_LINE_FORM.replace("_", r"[\t\x0b\x0c\r\x1c-\x1f ]").replace("W", "0-9A-Za-z_")
_PY_LINE, _PY_ASCII_LINE = re.compile(_PY_LINE_TEXT), re.compile(_PY_LINE_ASCII)
# The same from the newline before the line: a literal the regex engine skips to, trying each line once.
_PY_NEXT_LINE, _PY_ASCII_NEXT_LINE = re.compile("\n" + _PY_LINE_TEXT), re.compile("\n" + _PY_LINE_ASCII)
# Scanning every line costs about as much as 400 characters per line that has the word ``import`` (found
# with plain search, then matched alone); the cheaper of the two is taken for each file.
_SCAN_CHARS_PER_WORD = 400
_JS_SPEC = re.compile(
    r"""(?:import\s[^'"]*?from\s*|import\s*\(?\s*|require\(\s*|export\s[^'"]*?from\s*)['"]([^'"]+)['"]"""
)
_JS_KEYWORDS = ("import", "require(", "export")  # spelled out as bytes in import_candidates
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
    text = data.decode("utf-8", "replace")
    if (first := text.find("import")) == -1:
        return out
    begin = text.rfind("\n", 0, first) + 1  # the first line with the word; no line without it can import
    end = text.find("\n", text.rfind("import"))
    end = len(text) if end == -1 else end
    matches: Iterable[re.Match[str]]
    line, next_line = (_PY_ASCII_LINE, _PY_ASCII_NEXT_LINE) if text.isascii() else (_PY_LINE, _PY_NEXT_LINE)
    span = end - begin
    if span <= _SCAN_CHARS_PER_WORD or span <= _SCAN_CHARS_PER_WORD * text.count("import", begin, end):
        matches = next_line.finditer(text, begin - 1 if begin else 0, end)
        if not begin and (opening := line.match(text)) is not None:
            matches = itertools.chain((opening,), matches)
    else:
        matches = _lines_with_the_word(text, first, line)
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


def _lines_with_the_word(text: str, at: int, line: re.Pattern[str]) -> Iterator[re.Match[str]]:
    """The import lines (of the form ``line``) among those holding the word ``import``, the first at ``at``."""
    find, rfind, match_at = text.find, text.rfind, line.match
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


def _js_specs(text: str) -> list[str]:
    """What ``_JS_SPEC.finditer`` finds, trying the pattern only where one of its keywords starts."""
    starts: list[int] = []
    for word in _JS_KEYWORDS:
        at = text.find(word)
        while at != -1:
            starts.append(at)
            at = text.find(word, at + 1)
    starts.sort()  # each place once: the keywords start with different letters
    specs: list[str] = []
    done, match_at = 0, _JS_SPEC.match
    for at in starts:
        if at >= done and (match := match_at(text, at)) is not None:
            done = match.end()
            specs.append(match[1])
    return specs


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


def _js_resolve(folder: str, spec: str, known: Container[str]) -> str | None:
    """The file a relative ``spec`` names from a file in ``folder``: as it is, with an extension, as a
    folder's index, or a ``.js`` name for its TypeScript source, in that order of preference."""
    if not spec.startswith("."):
        return None
    base = posixpath.normpath(posixpath.join(folder, spec))
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


def import_candidates(path: str, language: str, data: bytes) -> list[str]:
    """What ``path`` names as imports (Python module stems, JavaScript specifiers), unresolved: read once
    at intake, resolved by ``resolve_imports`` when every file of the repository is known."""
    if language == "python":
        return _python_candidates(_dirname(path), data)
    if language in _JS_LANGUAGES and (b"import" in data or b"require(" in data or b"export" in data):
        return _js_specs(data.decode("utf-8", errors="replace"))
    return []


class ImportResolver:
    """What ``import_candidates`` name, resolved against the files of one repository (``known``); the
    Python module stems are indexed once, so each import costs one lookup."""

    def __init__(self, known: Collection[str]) -> None:
        self.known = known
        self.modules = _python_modules(known)

    def resolve(self, path: str, language: str, candidates: Iterable[str]) -> set[str]:
        """The repository files among ``candidates``, other than ``path``."""
        if language == "python":
            get = self.modules.get
            targets = {get(name.strip("/")) for name in candidates}
        else:
            folder, known = posixpath.dirname(path), self.known
            targets = {_js_resolve(folder, name, known) for name in candidates}
        return {target for target in targets if target and target != path}


def import_edges(path: str, language: str, text: str, known: Collection[str]) -> set[str]:
    """Repo files that ``path`` imports, read with plain string search and regular expressions (fast,
    approximate)."""
    return ImportResolver(known).resolve(
        path, language, import_candidates(path, language, text.encode("utf-8", "surrogatepass"))
    )
