"""Where in its lines a finding's evidence sits: SARIF columns, counted in UTF-16 code units.

A finding names whole lines; its evidence was checked to appear there (each quoted line inside its file
line, so the first and last may be partial). The columns are known when the evidence's first quoted line
is found verbatim on the finding's first line and its last quoted line on the finding's last line; then
``startColumn`` is where the first starts and ``endColumn`` one past where the last ends (1-based, as
SARIF counts them, in the ``utf16CodeUnits`` GitHub's examples use). Otherwise the region stays whole lines.
"""

from __future__ import annotations

import re

_NEWLINE = re.compile(r"\r\n|\r|\n")  # the line ends GitHub counts, and no others


def file_lines(data: bytes) -> list[str]:
    """The lines of a file as code scanning numbers them (index 0 is line 1)."""
    return _NEWLINE.split(data.decode("utf-8", errors="replace"))


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def evidence_columns(lines: list[str], start_line: int, end_line: int, evidence: str) -> tuple[int, int] | None:
    """``(startColumn, endColumn)`` of ``evidence`` on lines ``start_line``-``end_line``, or None when not known."""
    quoted = [line.strip() for line in evidence.splitlines() if line.strip()]
    if not quoted or not 1 <= start_line <= end_line <= len(lines):
        return None
    if sum(1 for line in lines[start_line - 1 : end_line] if line.strip()) != len(quoted):
        return None  # the evidence covers only part of the finding's lines: columns would mislead
    first, last = lines[start_line - 1], lines[end_line - 1]
    begin = first.find(quoted[0])
    if begin < 0:
        return None
    if start_line == end_line:
        stop = begin + len(quoted[0])
    else:
        at = last.find(quoted[-1])
        if at < 0:
            return None
        stop = at + len(quoted[-1])
    start_column = _utf16_len(first[:begin]) + 1
    end_column = _utf16_len(last[:stop]) + 1
    return start_column, end_column
