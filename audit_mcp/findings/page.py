"""The audit as one self-contained HTML page: its style and script inline, its data a JSON block, no request.

The page is built in the browser from the document ``page_data`` makes, and every text in that document
(file names, titles, evidence, a reviewer's words) reaches the page as a text node or an attribute value,
never as markup. Three guards keep it so:

- the data sits in a ``<script type="application/json">`` block, which no browser runs, with ``<``, ``>``
  and ``&`` written as JSON escapes so nothing in it can close the block (non-ASCII is escaped too, so the
  line separators U+2028/2029 and unpaired surrogates from odd file names are escapes as well);
- a Content-Security-Policy lets only the page's own style and script run (by their SHA-256), forbids every
  other source (``default-src 'none'``: no image, font, frame or connection; the live page served over HTTP
  may connect to its own origin to refresh), and makes every HTML-parsing sink refuse strings
  (``require-trusted-types-for 'script'``), so markup built from text would throw rather than render;
- the script writes text with ``textContent`` and shows control and bidirectional characters as escapes.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from functools import cache
from importlib import resources
from typing import Any

from audit_mcp.core.escape import visible

DATA_ELEMENT_ID = "audit-data"
_JSON_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


@cache
def _asset(name: str) -> str:
    return resources.files("audit_mcp.findings").joinpath("page_assets", name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def content_security_policy(*, live: bool = False, header: bool = False) -> str:
    """The page's policy: its own style and script only, nothing fetched (``live``: its own origin may be
    fetched again, to refresh), no markup from strings, no ``<base>``, no form; ``header``: as a response
    header, which also forbids framing (a ``<meta>`` policy cannot)."""
    directives = [
        "default-src 'none'",
        f"script-src {_sha256(_asset('page.js'))}",
        f"style-src {_sha256(_asset('page.css'))}",
        "connect-src 'self'" if live else "connect-src 'none'",
        "img-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    ]
    return "; ".join([*directives, "frame-ancestors 'none'"] if header else directives)


def data_block(doc: Any) -> str:
    """``doc`` as JSON that is inert inside a ``<script type="application/json">`` element."""
    return json.dumps(doc, ensure_ascii=True, separators=(",", ":")).translate(_JSON_ESCAPES)


def render_page(doc: dict[str, Any], *, live: bool = False) -> str:
    """The page for ``doc`` (``page_data.page_document``); ``live`` for the copy ``serve --http`` serves,
    which refreshes itself from its own address while the audit runs."""
    # Served live, the header's policy is enforced beside this one: both allow the same.
    meta_policy = content_security_policy(live=live)
    name = visible(str(doc.get("repo", {}).get("name", "")))
    return (
        "<!doctype html>\n"
        f'<html lang="en" data-live="{1 if live else 0}">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(meta_policy, quote=False)}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>Audit: {html.escape(name)}</title>\n"
        f"<style>{_asset('page.css')}</style>\n</head>\n<body>\n"
        "<noscript><p>This page draws the audit with its own script, which your browser did not run. The same "
        "audit is in report.md and report.json beside this file.</p></noscript>\n"
        '<main id="app" aria-live="polite"></main>\n'
        f'<script type="application/json" id="{DATA_ELEMENT_ID}">{data_block(doc)}</script>\n'
        f"<script>{_asset('page.js')}</script>\n"
        "</body>\n</html>\n"
    )
