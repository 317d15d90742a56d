"""What a file's bytes alone say about reviewing it (intake asks once it has read them): binary, empty,
generated (by its header), or with a line wider than a review packet holds (minified or one-line)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from audit_mcp.engine.attributes import Attributes


def content_skip(
    data: bytes, size: int, marks: Attributes, by_header: Callable[..., str | None], rel: str
) -> str | None:
    """Why a file is skipped for its bytes: binary, empty, or a generated header."""
    if b"\0" in (data if size <= 8192 else data[:8192]):
        return "binary file"
    if not size or data.isspace():
        return "empty file"
    return by_header(rel, data, marks)


def wide_line(data: bytes, limit: int) -> int | None:
    """The length of the longest line when one is over ``limit`` characters (a packet holds whole lines, so
    such a file cannot be chunked to fit), else ``None``; cheap for the files that cannot have one."""
    if len(data) <= limit:
        return None
    # The first line, then each newline and the line after it (as if searching the data after a newline).
    first = data.find(b"\n")
    if (first == -1 or first > limit) or _over(limit).search(data, first) is not None:
        return max(len(line) for line in data.split(b"\n"))
    return None


@functools.lru_cache(maxsize=64)
def _over(limit: int) -> re.Pattern[bytes]:
    """A line of more than ``limit`` characters, from the newline before it. The leading newline is a
    literal the regex engine skips to, so each line is tried once: without it every position of every line
    is a start, and a large file of ordinary lines costs its size times its line length (34 times slower
    on a real source tree)."""
    return re.compile(rb"\n[^\n]{%d}" % (limit + 1))
