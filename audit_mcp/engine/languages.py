"""Language detection by file name, extension or shebang, and characters per token by language."""

from __future__ import annotations

import posixpath
import re

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

# Characters per token, pessimistic for current tokenizers (see BENCHMARKS.md and docs/scale.md).
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
    ext = name[dot:] if dot > 0 and (name[0] != "." or name[:dot].strip(".")) else ""
    if (known := _BY_EXTENSION.get(ext)) is not None:
        return known
    stem = name[:dot] if ext else name
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
