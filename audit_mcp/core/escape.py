"""Escaping untrusted text for where it is rendered: Markdown, a terminal, a URI.

Reviewer text and file names come from outside. In Markdown they must not open a heading, a list, a
quote, HTML, a link or an image, nor end a table cell or a code block early; on a terminal they must not
carry escape sequences; in SARIF a path is a URI reference and is percent-encoded. Counts and
completeness are never passed through here: the renderers write them from the engine's numbers.
"""

from __future__ import annotations

import re
from urllib.parse import quote

# Characters that can open Markdown syntax outside a code span: escapes, emphasis, links and images,
# HTML and autolinks, table cells, headings; an underscore only at a word's edge (inside one it is inert).
_INLINE = re.compile(r"([\\*\[<|#`]|(?<![^\W_])_|_(?![^\W_]))")
_TICKS = re.compile(r"`+")
# Line starts that open a block: a quote, a list item, a setext underline, a thematic break, a fence.
_BLOCK_START = re.compile(r"^(\s*)([>+=~-])", re.M)
_ORDERED_START = re.compile(r"^(\s*\d+)([.)])", re.M)
# What GitHub turns into a link by itself (URLs, www. names, mailto:/xmpp:, e-mail addresses): shown as code,
# which no renderer links.
_AUTOLINK = re.compile(r"(?i)\b(?:[a-z][a-z0-9+.-]*://|www\.|mailto:|xmpp:)\S*|[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_KEEP_LINES = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_ESCAPE_SEQUENCE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-_])")


def visible(text: str) -> str:
    """``text`` on one line with every control character shown as an escape (``\\n``, ``\\x1b``)."""
    return _CONTROL.sub(lambda m: _shown(m.group(0)), text.encode("utf-8", "backslashreplace").decode("utf-8"))


def _shown(char: str) -> str:
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(
        char, f"\\x{ord(char):02x}" if ord(char) < 256 else f"\\u{ord(char):04x}"
    )


def md_inline(text: object, *, in_table: bool = False) -> str:
    """Untrusted text inside a Markdown line: one line, no syntax of its own but its code spans (re-fenced
    so that nothing in them can close them early), no bare links."""
    flat = visible(re.sub(r"\r\n|[\r\n]", " ", str(text)))
    out = []
    for is_code, part in _spans(flat):
        if is_code:
            out.append(md_code(part, in_table=in_table))
            continue
        at = 0
        for link in _AUTOLINK.finditer(part):
            out += [_INLINE.sub(r"\\\1", part[at : link.start()]), md_code(link.group(0), in_table=in_table)]
            at = link.end()
        out.append(_INLINE.sub(r"\\\1", part[at:]))
    return "".join(out)


def _spans(text: str) -> list[tuple[bool, str]]:
    """``text`` split into plain parts and code-span contents, as CommonMark pairs backtick runs."""
    out: list[tuple[bool, str]] = []
    start = pos = 0
    while (opening := _TICKS.search(text, pos)) is not None:
        width = len(opening.group())
        closing = next((c for c in _TICKS.finditer(text, opening.end()) if len(c.group()) == width), None)
        if closing is None:
            pos = opening.end()  # an unmatched run is plain text (and is escaped with it)
            continue
        out.append((False, text[start : opening.start()]))
        body = text[opening.end() : closing.start()]
        if len(body) > 2 and body.startswith(" ") and body.endswith(" ") and body.strip():
            body = body[1:-1]
        out.append((True, body))
        start = pos = closing.end()
    out.append((False, text[start:]))
    return [(code, part) for code, part in out if part or code]


def md_block(text: object) -> str:
    """Untrusted text as Markdown paragraphs: its lines kept, none of them able to open a block."""
    lines = _CONTROL_KEEP_LINES.sub("", str(text).replace("\r\n", "\n").replace("\r", "\n")).split("\n")
    out = []
    for line in lines:
        escaped = md_inline(line.replace("\t", "    ").lstrip())
        out.append(_ORDERED_START.sub(r"\1\\\2", _BLOCK_START.sub(r"\1\\\2", escaped)))
    return "\n".join(out).strip("\n")


def md_code(text: object, *, in_table: bool = False) -> str:
    """Untrusted text as an inline code span: a fence longer than any backtick run in it, one line."""
    body = visible(str(text))
    if in_table:
        body = body.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    if body.startswith(("`", " ")) or body.endswith(("`", " ")):
        body = f" {body} "
    return f"{fence}{body}{fence}"


def md_fence(text: object, info: str = "") -> str:
    """Untrusted text as a fenced code block that nothing inside it can close."""
    body = _CONTROL_KEEP_LINES.sub("", str(text).encode("utf-8", "backslashreplace").decode("utf-8"))
    body = body.replace("\r\n", "\n").replace("\r", "\n")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def md_cell(text: object) -> str:
    """Untrusted text in a Markdown table cell (a pipe, even in a code span, cannot end the cell)."""
    return md_inline(text, in_table=True)


def terminal(text: str) -> str:
    """Text for a terminal: escape sequences and other control characters removed (newlines and tabs kept)."""
    return _CONTROL_KEEP_LINES.sub("", _ESCAPE_SEQUENCE.sub("", text))


def uri_path(path: str) -> str:
    """A repository-relative POSIX path as a URI reference (RFC 3986), percent-encoded."""
    return quote(path.encode("utf-8", "surrogateescape"), safe="/-._~")
