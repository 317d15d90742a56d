"""How ``scan_parts`` hands results between processes: frames of bytes after their length, a slice's
results in frames of ``BATCH`` as ``marshal`` data (plain values, no objects or code), ended by an empty
frame, so a reader decodes a batch at a time and knows a stream cut short from a whole one."""

from __future__ import annotations

import marshal
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

# What the caller makes of one result that came back as plain values (a row again, say).
Decode = Callable[[Any], Any]
ReadInto = Callable[[memoryview], int | None]

BATCH = 2_000  # results a frame
_HEADER = struct.Struct(">Q")  # the length of the frame that follows
_MAX_FRAME = 1 << 30  # more than any slice's batch: a length past it is not a frame of ours


def frame(data: bytes) -> bytes:
    """``data`` after its length."""
    return _HEADER.pack(len(data)) + data


def _exactly(readinto: ReadInto, size: int) -> bytearray | None:
    """``size`` bytes read with ``readinto``, or ``None`` when the other end closes first."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        n = readinto(view[got:])
        if not n:
            return None
        got += n
    return buffer


def read_frame(readinto: ReadInto) -> bytearray | None:
    """The next frame's bytes (empty for the frame that ends a stream), or ``None`` at the end of input."""
    head = _exactly(readinto, _HEADER.size)
    if head is None or (size := _HEADER.unpack(head)[0]) > _MAX_FRAME:
        return None
    return _exactly(readinto, size)


def result_frames(results: list[Any]) -> Iterator[bytes]:
    """A slice's results as frames of at most ``BATCH`` each, then an empty frame that ends them (so the
    reader decodes a batch at a time, and holds no more than one batch's encoded bytes)."""
    for start in range(0, len(results), BATCH):
        yield frame(marshal.dumps(results[start : start + BATCH]))
    yield frame(b"")


def read_results(readinto: ReadInto, names: Sequence[str], decode: Decode) -> tuple[list[Any] | None, str]:
    """A slice's results, each decoded, checked to be one per name; or ``None`` and why not."""
    out: list[Any] = []
    while True:
        data = read_frame(readinto)
        if data is None:
            return None, "its results were cut short"
        if not data:
            break
        try:
            out += [decode(item) for item in marshal.loads(data)]
        except (EOFError, ValueError, TypeError) as exc:
            return None, f"its results could not be read ({exc})"
    if len(out) != len(names):
        return None, "its results did not hold one entry per file"
    return out, ""
