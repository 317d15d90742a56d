"""Language detection by file name, extension or shebang, and the import edges that are cheap to read."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection, Container, Iterable

_BY_EXTENSION = {
    ".py": "python",
    ".pyi": "python",
    ".pyw": "python",
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
    ".kts": "kotlin",
    ".scala": "scala",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".cs": "csharp",
    ".fs": "fsharp",
    ".vb": "vb",
    ".rb": "ruby",
    ".php": "php",
    ".swift": "swift",
    ".m": "objc",
    ".mm": "objc",
    ".sh": "shell",
    ".bash": "shell",
    ".zsh": "shell",
    ".ksh": "shell",
    ".fish": "shell",
    ".ps1": "powershell",
    ".psm1": "powershell",
    ".bat": "batch",
    ".cmd": "batch",
    ".sql": "sql",
    ".html": "html",
    ".htm": "html",
    ".jinja": "template",
    ".jinja2": "template",
    ".j2": "template",
    ".tpl": "template",
    ".hbs": "template",
    ".mustache": "template",
    ".ejs": "template",
    ".erb": "template",
    ".css": "css",
    ".scss": "css",
    ".sass": "css",
    ".less": "css",
    ".vue": "vue",
    ".svelte": "svelte",
    ".lua": "lua",
    ".pl": "perl",
    ".pm": "perl",
    ".r": "r",
    ".jl": "julia",
    ".ex": "elixir",
    ".exs": "elixir",
    ".erl": "erlang",
    ".hs": "haskell",
    ".ml": "ocaml",
    ".clj": "clojure",
    ".dart": "dart",
    ".zig": "zig",
    ".nim": "nim",
    ".sol": "solidity",
    ".groovy": "groovy",
    ".tcl": "tcl",
    ".tf": "terraform",
    ".tfvars": "terraform",
    ".hcl": "hcl",
    ".nix": "nix",
    ".proto": "protobuf",
    ".graphql": "graphql",
    ".gql": "graphql",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".jsonc": "json",
    ".json5": "json",
    ".toml": "toml",
    ".ini": "ini",
    ".cfg": "ini",
    ".conf": "conf",
    ".properties": "properties",
    ".env": "dotenv",
    ".xml": "xml",
    ".plist": "xml",
    ".gradle": "groovy",
    ".cmake": "cmake",
    ".mk": "make",
    ".mak": "make",
    ".bzl": "starlark",
    ".bazel": "starlark",
    ".md": "markdown",
    ".markdown": "markdown",
    ".rst": "rst",
    ".txt": "text",
    ".adoc": "asciidoc",
    ".svg": "svg",
    ".csv": "csv",
    ".tsv": "tsv",
    ".po": "po",
    ".pot": "po",
    ".snap": "snapshot",
    ".ipynb": "jupyter",
    ".lock": "lock",
}
# Well-known file names, whatever their extension (or lack of one).
_BY_NAME = {
    "dockerfile": "dockerfile",
    "containerfile": "dockerfile",
    "makefile": "make",
    "gnumakefile": "make",
    "justfile": "just",
    "cmakelists.txt": "cmake",
    "meson.build": "meson",
    "build": "starlark",
    "build.bazel": "starlark",
    "workspace": "starlark",
    "workspace.bazel": "starlark",
    "module.bazel": "starlark",
    "make.bat": "batch-build",
    "make.cmd": "batch-build",
    "jenkinsfile": "groovy",
    "rakefile": "ruby",
    "gemfile": "ruby",
    "vagrantfile": "ruby",
    "podfile": "ruby",
    "brewfile": "ruby",
    "procfile": "conf",
    "manifest.in": "manifest-in",
    ".env": "dotenv",
    ".gitignore": "ignore-file",
    ".dockerignore": "ignore-file",
    ".npmignore": "ignore-file",
    ".gitattributes": "ignore-file",
    ".editorconfig": "editorconfig",
    ".npmrc": "ini",
    ".pypirc": "ini",
    ".htaccess": "conf",
    "license": "text",
    "licence": "text",
    "copying": "text",
    "notice": "text",
    "authors": "text",
    "changelog": "text",
    "pkg-info": "text",
}
_REQUIREMENTS = re.compile(r"^(?:.*[-_.])?requirements(?:[-_.].*)?\.(?:txt|in)$|^constraints\.txt$")
# The interpreter a ``#!`` line names, for files whose name says nothing (``bin/deploy``).
_SHEBANG_LANGUAGES = {
    "python": "python",
    "pypy": "python",
    "node": "javascript",
    "nodejs": "javascript",
    "bun": "javascript",
    "deno": "typescript",
    "ts-node": "typescript",
    "tsx": "typescript",
    "bash": "shell",
    "sh": "shell",
    "dash": "shell",
    "zsh": "shell",
    "ksh": "shell",
    "ash": "shell",
    "fish": "shell",
    "ruby": "ruby",
    "perl": "perl",
    "php": "php",
    "lua": "lua",
    "rscript": "r",
    "pwsh": "powershell",
    "elixir": "elixir",
    "escript": "erlang",
    "runghc": "haskell",
    "tclsh": "tcl",
    "groovy": "groovy",
    "julia": "julia",
    "swift": "swift",
    "make": "make",
}
_VERSION_SUFFIX = re.compile(r"[0-9.]+$")

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


def detect_language(path: str, head: bytes = b"") -> str:
    """The language of ``path``: by its name, then its extension, then the ``#!`` line opening ``head``
    (the file's first bytes, when they were read)."""
    # posixpath.basename and splitext spelled out (this runs once per file of the repository).
    cut = path.rfind("/")
    name = path[cut + 1 :].lower()
    if name in _BY_NAME:
        return _BY_NAME[name]
    if ("requirements" in name or name == "constraints.txt") and _REQUIREMENTS.match(name):
        return "requirements"
    if name.endswith((".txt", ".in")) and posixpath.basename(posixpath.dirname(path)).lower() == "requirements":
        return "requirements"
    dot = name.rfind(".")
    # A name's leading dots are part of its stem (``.bashrc`` has no extension), as in splitext.
    if dot > 0 and name[:dot].strip("."):
        stem, ext = name[:dot], name[dot:]
    else:
        stem, ext = name, ""
    if ext in _BY_EXTENSION:
        return _BY_EXTENSION[ext]
    if stem.startswith(("dockerfile", "containerfile")) or ext in (".dockerfile", ".containerfile"):
        return "dockerfile"
    if stem.startswith(("makefile", "gnumakefile")):
        return "make"
    if stem == "jenkinsfile":
        return "groovy"
    if sniffed := shebang_language(head):
        return sniffed
    return "text" if not ext else ext.lstrip(".")


def shebang_language(head: bytes) -> str | None:
    """The language a ``#!`` first line names (``#!/usr/bin/env bash`` → shell), if any."""
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", errors="replace").split()
    if words and posixpath.basename(words[0]) == "env":
        # env's own options and variable assignments come before the program (`env -S VAR=1 python3 -u`).
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if not words:
        return None
    program = posixpath.basename(words[0]).lower()
    return _SHEBANG_LANGUAGES.get(program) or _SHEBANG_LANGUAGES.get(_VERSION_SUFFIX.sub("", program))


def chars_per_token(language: str) -> float:
    return _CHARS_PER_TOKEN.get(language, DEFAULT_CHARS_PER_TOKEN)


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
