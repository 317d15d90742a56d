"""Language detection by file name, and the import edges that are cheap to read."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

_BY_EXTENSION = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".kt": "kotlin",
    ".scala": "scala",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".swift": "swift",
    ".m": "objc",
    ".sh": "shell",
    ".bash": "shell",
    ".zsh": "shell",
    ".ps1": "powershell",
    ".sql": "sql",
    ".html": "html",
    ".htm": "html",
    ".css": "css",
    ".scss": "css",
    ".vue": "vue",
    ".svelte": "svelte",
    ".lua": "lua",
    ".pl": "perl",
    ".r": "r",
    ".ex": "elixir",
    ".exs": "elixir",
    ".erl": "erlang",
    ".hs": "haskell",
    ".ml": "ocaml",
    ".dart": "dart",
    ".tf": "terraform",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".toml": "toml",
    ".ini": "ini",
    ".cfg": "ini",
    ".xml": "xml",
    ".gradle": "groovy",
    ".md": "markdown",
    ".rst": "rst",
    ".txt": "text",
    ".adoc": "asciidoc",
}
_BY_NAME = {
    "dockerfile": "dockerfile",
    "makefile": "make",
    "jenkinsfile": "groovy",
    "rakefile": "ruby",
    "gemfile": "ruby",
    "license": "text",
    "licence": "text",
    "copying": "text",
    "notice": "text",
    "authors": "text",
    "changelog": "text",
}
DOC_LANGUAGES = frozenset({"markdown", "rst", "text", "asciidoc"})

# Characters per token, pessimistic for current tokenizers (see BENCHMARKS.md and the README).
_CHARS_PER_TOKEN = {
    "python": 2.6,
    "typescript": 2.5,
    "javascript": 2.15,
    "c": 2.2,
    "cpp": 2.2,
    "markdown": 2.55,
    "json": 2.45,
}
DEFAULT_CHARS_PER_TOKEN = 2.3


def detect_language(path: str) -> str:
    name = posixpath.basename(path).lower()
    if name in _BY_NAME:
        return _BY_NAME[name]
    stem, ext = posixpath.splitext(name)
    if ext in _BY_EXTENSION:
        return _BY_EXTENSION[ext]
    if stem.startswith("dockerfile"):
        return "dockerfile"
    return "text" if not ext else ext.lstrip(".")


def chars_per_token(language: str) -> float:
    return _CHARS_PER_TOKEN.get(language, DEFAULT_CHARS_PER_TOKEN)


_PY_IMPORT_LINE = re.compile(r"^[ \t]*(?:import|from)[ \t].*$", re.M)
_PY_IMPORT = re.compile(r"^\s*import\s+([\w.]+(?:\s*,\s*[\w.]+)*)", re.M)
_PY_FROM = re.compile(r"^\s*from\s+(\.*)([\w.]*)\s+import\s+([\w*, ()]+)", re.M)
_JS_SPEC = re.compile(
    r"""(?:import\s[^'"]*?from\s*|import\s*\(?\s*|require\(\s*|export\s[^'"]*?from\s*)['"]([^'"]+)['"]"""
)
_JS_EXTS = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".mts", ".cts")


def _python_targets(path: str, text: str) -> Iterable[str]:
    for line in _PY_IMPORT_LINE.finditer(text):  # cheap pre-filter: only lines that can import
        yield from _python_line_targets(path, line.group(0))


def _python_line_targets(path: str, text: str) -> Iterable[str]:
    package = posixpath.dirname(path)
    for match in _PY_IMPORT.finditer(text):
        for name in match.group(1).split(","):
            yield name.strip().replace(".", "/")
    for match in _PY_FROM.finditer(text):
        dots, module, names = match.group(1), match.group(2), match.group(3)
        if dots:
            base = package
            for _ in range(len(dots) - 1):
                base = posixpath.dirname(base)
            stem = posixpath.join(base, module.replace(".", "/")) if module else base
        else:
            stem = module.replace(".", "/")
        yield stem
        for name in names.replace("(", " ").replace(")", " ").split(","):
            name = name.strip().split(" ")[0]
            if name and name != "*":
                yield posixpath.join(stem, name)


def _python_resolve(stem: str, known: set[str]) -> str | None:
    candidate = stem.strip("/")
    if not candidate:
        return None
    for path in (f"{candidate}.py", f"{candidate}/__init__.py", f"src/{candidate}.py", f"src/{candidate}/__init__.py"):
        if path in known:
            return path
    return None


def _js_resolve(path: str, spec: str, known: set[str]) -> str | None:
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


def import_edges(path: str, language: str, text: str, known: set[str]) -> set[str]:
    """Repo files that ``path`` imports, read with regular expressions (fast, approximate)."""
    found: set[str] = set()
    if language == "python":
        for stem in _python_targets(path, text):
            target = _python_resolve(stem, known)
            if target and target != path:
                found.add(target)
    elif language in ("javascript", "typescript", "vue", "svelte"):
        for match in _JS_SPEC.finditer(text):
            target = _js_resolve(path, match.group(1), known)
            if target and target != path:
                found.add(target)
    return found
