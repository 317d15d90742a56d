"""GitHub's ``primaryLocationLineHash``, computed exactly as its upload action computes it.

A port of ``hash`` in github/codeql-action's ``src/fingerprints.ts``. The file is read as UTF-8 (invalid
bytes become U+FFFD, a byte-order mark is kept) and walked as UTF-16 code units. Spaces and tabs are
skipped wherever they are; ``\\r``, ``\\n`` and ``\\r\\n`` all count as one ``\\n``. A rolling hash
(base 37, on wrapping 64-bit integers) runs over a window of the next 100 kept characters from the
first kept character of each line, across line ends, with an end-of-file mark (65535) and zeros after
the last one; so a file that ends with a newline has one more "line" than it has lines. Each line's value
is the hash in lower-case hex, without padding, then ``:n``, where ``n`` counts how many lines so far had
that same hash. Code scanning matches alerts across analyses with it; a log uploaded through the REST API
(which computes nothing) needs it written in, or every upload duplicates its alerts.
"""

from __future__ import annotations

import sys

_BLOCK = 100
_MOD = 37
_MASK = (1 << 64) - 1
_FIRST_MOD = pow(_MOD, _BLOCK, 1 << 64)  # 37**100 as a wrapping 64-bit integer
_TAB, _SPACE, _LF, _CR, _EOF = 9, 32, 10, 13, 65535
_UTF16 = "utf-16-be" if sys.byteorder == "big" else "utf-16-le"


def _code_units(data: bytes) -> list[int]:
    """The UTF-16 code units of ``data`` read as UTF-8, as JavaScript's ``charCodeAt`` sees them."""
    return memoryview(data.decode("utf-8", errors="replace").encode(_UTF16)).cast("H").tolist()


def line_hashes(data: bytes) -> list[str]:
    """The ``hash:n`` value of every line of a file (index 0 is line 1), plus the end-of-file line when the
    file ends with a newline."""
    window = [0] * _BLOCK
    starts = [-1] * _BLOCK  # the line that starts at each window position, or -1
    counts: dict[str, int] = {}
    out: list[str] = []
    h = index = line_no = 0
    line_start, prev_cr = True, False

    def emit() -> None:
        value = format(h, "x")
        counts[value] = counts.get(value, 0) + 1
        out.append(f"{value}:{counts[value]}")
        starts[index] = -1

    units = _code_units(data)
    units.append(_EOF)
    for cur in units:
        if cur in (_SPACE, _TAB) or (prev_cr and cur == _LF):
            prev_cr = False
            continue
        if cur == _CR:
            cur, prev_cr = _LF, True
        else:
            prev_cr = False
        if starts[index] != -1:
            emit()
        if line_start:
            line_start = False
            line_no += 1
            starts[index] = line_no
        if cur == _LF:
            line_start = True
        begin, window[index] = window[index], cur
        h = (_MOD * h + cur - _FIRST_MOD * begin) & _MASK
        index = (index + 1) % _BLOCK
    for _ in range(_BLOCK):
        if starts[index] != -1:
            emit()
        begin, window[index] = window[index], 0
        h = (_MOD * h - _FIRST_MOD * begin) & _MASK
        index = (index + 1) % _BLOCK
    return out


def primary_location_line_hash(data: bytes, line: int) -> str | None:
    """The value the upload action would give a result whose location starts at ``line`` (1-based)."""
    hashes = line_hashes(data)
    return hashes[line - 1] if 1 <= line <= len(hashes) else None
