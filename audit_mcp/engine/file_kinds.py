"""What a file is for: source, test, build script, config, markup, docs or data.

A file's kind decides which lenses can say anything about it (``lens_map``): concurrency cannot apply to
``tox.ini``, and the security lens itself says not to report in test files. The kind comes from the path
and the language (which ``languages`` reads from the name, the extension or a shebang); git's
``linguist-documentation`` attribute marks docs explicitly.
"""

from __future__ import annotations

import functools
import re
from enum import StrEnum


class FileKind(StrEnum):
    SOURCE = "source"
    TEST = "test"
    BUILD = "build"
    CONFIG = "config"
    MARKUP = "markup"
    DOCS = "docs"
    DATA = "data"


DOC_LANGUAGES = frozenset({"markdown", "rst", "text", "asciidoc"})
CONFIG_LANGUAGES = frozenset(
    {
        "yaml",
        "json",
        "toml",
        "ini",
        "xml",
        "dotenv",
        "properties",
        "conf",
        "manifest-in",
        "requirements",
        "terraform",
        "hcl",
        "nix",
        "protobuf",
        "graphql",
    }
)
BUILD_LANGUAGES = frozenset({"dockerfile", "make", "cmake", "starlark", "just", "meson", "batch-build"})
MARKUP_LANGUAGES = frozenset({"html", "template"})
# Assets, data, and files that only list paths or editor settings (.gitignore, .editorconfig).
DATA_LANGUAGES = frozenset(
    {"svg", "csv", "tsv", "po", "snapshot", "jupyter", "css", "lock", "ignore-file", "editorconfig"}
)

_TEST_DIRS = frozenset({"test", "tests", "__tests__", "spec", "specs", "testing", "e2e"})
_DOC_DIRS = frozenset({"doc", "docs", "documentation"})
_DATA_DIRS = frozenset({"fixtures", "testdata", "test_data", "__snapshots__", "snapshots"})
_TEST_NAME = re.compile(
    r"""^(?:test_.+\.py|.+_tests?\.py|conftest\.py|.+_test\.go|.+\.(?:test|spec)\.[cm]?[jt]sx?
    |.+(?:Test|Tests|IT)\.(?:java|kt|scala|cs|php|swift)|.+_spec\.rb|.+_test\.rb|test_.+\.rb|.+_test\.exs
    |.+_test\.(?:c|cc|cpp)|test_.+\.(?:c|cc|cpp))$""",
    re.X,
)
# Files that drive a build, a package or a CI job, whatever their language.
_BUILD_NAMES = frozenset(
    {
        "setup.py",
        "noxfile.py",
        "fabfile.py",
        "dodo.py",
        "build.gradle",
        "build.gradle.kts",
        "settings.gradle",
        "pom.xml",
        "build.xml",
        "gruntfile.js",
        "gulpfile.js",
        "rakefile",
        "jenkinsfile",
        "vagrantfile",
        ".gitlab-ci.yml",
        ".travis.yml",
        "azure-pipelines.yml",
        "bitbucket-pipelines.yml",
        "cloudbuild.yaml",
        "appveyor.yml",
        "build.sh",
        "make.bat",
        "make.cmd",
    }
)
_CI_DIRS = (".github/workflows/", ".circleci/", ".buildkite/", ".gitlab/ci/")
_DOCS_CONFIG_NAMES = frozenset({"conf.py", "mkdocs.yml", "_config.yml"})


def file_kind(path: str, language: str, *, documentation: bool = False) -> FileKind:
    """The kind of ``path``, written in ``language``; ``documentation`` when git says so (linguist)."""
    if documentation or language in DOC_LANGUAGES:
        return FileKind.DOCS
    if language in DATA_LANGUAGES:
        return FileKind.DATA
    lowered = path.lower()
    cut = lowered.rfind("/")
    return kind_of_name(path, language, lowered, lowered[cut + 1 :], folder_marks(lowered[:cut] if cut != -1 else ""))


def kind_of_name(
    path: str, language: str, lowered: str, name: str, folders: tuple[bool, bool, bool], documentation: bool = False
) -> FileKind:
    """``file_kind`` from what the caller has already worked out: ``path`` lowered, its lowered name and the
    ``folder_marks`` of its folder."""
    if documentation or language in DOC_LANGUAGES:
        return FileKind.DOCS
    if language in DATA_LANGUAGES:
        return FileKind.DATA
    if name in _BUILD_NAMES or language in BUILD_LANGUAGES or lowered.startswith(_CI_DIRS):
        return FileKind.BUILD
    docs_dir, test_dir, data_dir = folders
    if docs_dir and name in _DOCS_CONFIG_NAMES:
        return FileKind.CONFIG  # Sphinx's conf.py and friends configure the docs build
    testing = test_dir or _is_test_name(path[path.rfind("/") + 1 :])
    if language in CONFIG_LANGUAGES or language in MARKUP_LANGUAGES:
        # Data a test reads (fixtures, expected output) is not configuration anyone runs with.
        if testing or data_dir:
            return FileKind.DATA
        return FileKind.CONFIG if language in CONFIG_LANGUAGES else FileKind.MARKUP
    if testing:
        return FileKind.TEST
    return FileKind.SOURCE


def _is_test_name(name: str) -> bool:
    # Every form of _TEST_NAME spells one of these words: a plain search first (most names have none).
    return ("test" in name or "Test" in name or "spec" in name or "IT" in name) and bool(_TEST_NAME.match(name))


@functools.lru_cache(maxsize=4096)
def folder_marks(folder: str) -> tuple[bool, bool, bool]:
    """Whether any folder of ``folder`` (a lowered path of folders, ``""`` for the root) is a docs, a test
    or a data folder: the same for every file in it, so worked out once per folder."""
    dirs = set(folder.split("/")) if folder else set()
    return bool(dirs & _DOC_DIRS), bool(dirs & _TEST_DIRS), bool(dirs & _DATA_DIRS)
