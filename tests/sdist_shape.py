"""A repository shaped like the click 8.1.7 sdist: the same mix of file kinds, written by the test, nothing
downloaded. Source under ``src/``, tests under ``tests/``, Sphinx docs with their Makefile and make.bat,
packaging files (setup.py, setup.cfg, MANIFEST.in, tox.ini, PKG-INFO, egg-info), pinned requirements,
examples with their own setup.py, an SVG logo; plus a shebang script without an extension and a
Containerfile, which a real project carries beside those.
"""

from __future__ import annotations

from pathlib import Path

_MODULE = '''"""{name}: part of the command line toolkit."""

import os
import sys
import threading

_lock = threading.Lock()
_cache: dict[str, str] = {{}}


def {name}_lookup(key: str) -> str:
    with _lock:
        if key not in _cache:
            _cache[key] = os.environ.get(key, "")
    return _cache[key]


def {name}_echo(message: str) -> None:
    try:
        sys.stdout.write(message + "\\n")
    except OSError:
        pass
'''
_TEST = """from click.{name} import {name}_lookup


def test_{name}_lookup(monkeypatch):
    monkeypatch.setenv("X", "1")
    assert {name}_lookup("X") == "1"
"""
_SVG = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="200" height="60">\n'
    + "".join(f'  <path d="M{i} {i} L{i + 40} {i + 9} Z" fill="#{i:06x}"/>\n' for i in range(0, 8700, 73))
    + "</svg>\n"
)
SOURCE_MODULES = (
    "core",
    "decorators",
    "exceptions",
    "formatting",
    "globals",
    "parser",
    "shell_completion",
    "termui",
    "testing",
    "types",
    "utils",
    "_compat",
    "_termui_impl",
    "_textwrap",
    "_winconsole",
)
FILES: dict[str, str] = {
    "setup.py": "from setuptools import setup\n\n"
    "setup(name='click', install_requires=['colorama; platform_system == \"Windows\"'])\n",
    "setup.cfg": "[metadata]\nname = click\nversion = attr: click.__version__\n\n[options]\npackages = find:\n"
    "package_dir = = src\n\n[tool:pytest]\ntestpaths = tests\n",
    "tox.ini": "[tox]\nenvlist = py3{12,11,10,9,8,7}\nskip_missing_interpreters = true\n\n[testenv]\n"
    "deps = -r requirements/tests.txt\ncommands = pytest -v --tb=short --basetemp={envtmpdir} {posargs}\n",
    "MANIFEST.in": "include CHANGES.rst\ninclude tox.ini\ninclude requirements/*.txt\ngraft artwork\ngraft docs\n"
    "prune docs/_build\ngraft examples\ngraft tests\nglobal-exclude *.pyc\n",
    "PKG-INFO": "Metadata-Version: 2.1\nName: click\nVersion: 8.1.7\n"
    "Summary: Composable command line interface toolkit\n",
    "README.rst": "Click\n=====\n\nClick is a Python package for creating beautiful command line interfaces.\n",
    "CHANGES.rst": "Version 8.1.7\n-------------\n\nReleased 2023-08-17\n\n-   Fix issue with regex flags.\n",
    "LICENSE.rst": "Copyright 2014 Pallets\n\nRedistribution and use in source and binary forms are permitted.\n",
    "artwork/logo.svg": _SVG,
    "docs/Makefile": "SPHINXBUILD ?= sphinx-build\nSOURCEDIR = .\nBUILDDIR = _build\n\nhelp:\n"
    '\t@$(SPHINXBUILD) -M help "$(SOURCEDIR)" "$(BUILDDIR)"\n\n%: Makefile\n'
    '\t@$(SPHINXBUILD) -M $@ "$(SOURCEDIR)" "$(BUILDDIR)"\n',
    "docs/make.bat": '@ECHO OFF\r\npushd %~dp0\r\nif "%SPHINXBUILD%" == "" (\r\n\tset SPHINXBUILD=sphinx-build\r\n)\r\n'
    "%SPHINXBUILD% -M %1 . _build\r\npopd\r\n",
    "docs/conf.py": "from pallets_sphinx_themes import ProjectLink\n\nproject = 'Click'\nextensions = "
    "['sphinx.ext.autodoc', 'sphinx.ext.intersphinx']\nhtml_theme = 'click'\n",
    "docs/index.rst": "Welcome to Click\n================\n\n.. toctree::\n   api\n",
    "docs/api.rst": "API\n===\n\n.. module:: click\n",
    "docs/_static/click-icon.png": "\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
    "requirements/tests.in": "pytest\n",
    "requirements/tests.txt": "iniconfig==2.0.0\npluggy==1.2.0\npytest==7.4.0\n",
    "requirements/docs.txt": "sphinx==7.1.2\npallets-sphinx-themes==2.1.1\n",
    "examples/repo/repo.py": "import click\n\n\n@click.group()\ndef cli():\n    pass\n",
    "examples/repo/setup.py": "from setuptools import setup\n\nsetup(name='click-example-repo', py_modules=['repo'])\n",
    "examples/repo/README": "$ repo_\n\n"
    "  repo is a simple example of an application that looks like a version control system.\n",
    "src/click/__init__.py": '"""Click is a simple Python module."""\n\nfrom .core import core_lookup\n',
    "src/click/py.typed": "",
    "src/click.egg-info/PKG-INFO": "Metadata-Version: 2.1\nName: click\nVersion: 8.1.7\n",
    "src/click.egg-info/SOURCES.txt": "CHANGES.rst\nLICENSE.rst\nMANIFEST.in\nsrc/click/core.py\n",
    "src/click.egg-info/top_level.txt": "click\n",
    "tests/conftest.py": "import pytest\n\n\n@pytest.fixture\ndef runner():\n"
    "    from click.testing import CliRunner\n\n"
    "    return CliRunner()\n",
    "tests/typing/typing_simple_example.py": "import click\n\n\n@click.command()\ndef hello() -> None:\n"
    "    click.echo('hi')\n",
    # Beside the sdist's own kinds: a script known only by its shebang (not executable, as in a zip or an
    # sdist), and a container build file without an extension.
    "bin/deploy": '#!/usr/bin/env bash\nset -eu\nrsync -a dist/ "$DEPLOY_HOST:/srv/click/"\n',
    "Containerfile": 'FROM python:3.12-slim\nCOPY . /src\nRUN pip install /src\nENTRYPOINT ["python", "-m", "click"]\n',
}
FILES.update({f"src/click/{name}.py": _MODULE.format(name=name.strip("_")) for name in SOURCE_MODULES})
FILES.update({f"tests/test_{name.strip('_')}.py": _TEST.format(name=name.strip("_")) for name in SOURCE_MODULES})


def write_sdist(root: Path) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("latin-1"))
    return root


# What a reviewer can answer, by path, under the default lenses: the expectation the tests check the
# matrix against, written from what the files are, not from the code's own map.
RUNNING_CODE = ("src/click/", "examples/repo/repo.py", "bin/deploy")
BUILD_SCRIPTS = ("docs/Makefile", "docs/make.bat", "Containerfile", "setup.py", "examples/repo/setup.py")
NEVER_REVIEWED = (
    "artwork/logo.svg",
    "docs/_static/click-icon.png",
    "src/click/py.typed",
    "src/click.egg-info/",
    "README.rst",
    "CHANGES.rst",
    "LICENSE.rst",
    "PKG-INFO",
    "docs/index.rst",
    "docs/api.rst",
    "examples/repo/README",
)


def lens_can_apply(path: str, lens: str) -> bool:
    """Whether ``lens`` has anything to say about ``path`` in this repository."""
    if path.startswith(NEVER_REVIEWED):
        return False
    if lens in ("concurrency", "performance", "error_handling"):
        # Threads, hot paths and failing calls live in code that runs as the product; build scripts fail
        # too (error handling), but a config file or a test does neither of the other two.
        return path.startswith(RUNNING_CODE) or (lens == "error_handling" and path in BUILD_SCRIPTS)
    if lens == "security":
        return not path.startswith("tests/")
    if lens == "maintainability":
        return path.startswith((*RUNNING_CODE, "tests/")) or path in BUILD_SCRIPTS
    return True  # correctness: any of these can simply be wrong
