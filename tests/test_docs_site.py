"""The documentation site builds strictly (every internal link and anchor resolves) and a page loads nothing from
the network when viewed: no web fonts, no scripts or styles from elsewhere, Mermaid drawn by the local copy."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parent.parent
# What a browser fetches on its own while it shows a page (links a reader may follow are not among them).
_FETCHED = re.compile(r"<(?:script|img|iframe|source)\b[^>]*\bsrc=\"([^\"]+)\"|<link\b[^>]*\bhref=\"([^\"]+)\"")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    assert mkdocs, "mkdocs is in the test extras: pip install -e '.[test]'"
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [mkdocs, "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=PROJECT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def test_no_page_fetches_anything_from_the_network(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 20
    for page in pages:
        html = page.read_text(encoding="utf-8")
        fetched = [a or b for a, b in _FETCHED.findall(html)]
        remote = [url for url in fetched if re.match(r"(?:https?:)?//", url)]
        assert not remote, f"{page.relative_to(site)} fetches {remote}"
        assert "fonts.googleapis" not in html and "fonts.gstatic" not in html


def test_the_diagrams_are_text_that_needs_no_script(site: Path) -> None:
    loop = (site / "loop" / "index.html").read_text(encoding="utf-8")
    assert "merge_and_ingest(run_id, failures)" in loop and "mermaid" not in loop.lower()
