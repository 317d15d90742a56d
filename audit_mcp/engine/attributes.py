"""What a repository's ``.gitattributes`` say about its files: GitHub Linguist's generated, vendored and
documentation marks, as ``git check-attr`` reports them.

``linguist-generated`` and ``linguist-vendored`` skip a file whatever its name; set to ``false`` they keep
a file the name or header heuristics would skip (``vendor/ours.js linguist-vendored=false``).
``linguist-documentation`` makes a file docs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

NAMES = ("linguist-generated", "linguist-vendored", "linguist-documentation")


@dataclass(frozen=True)
class Attributes:
    """Each mark: True (set), False (unset or ``false``), None (not specified: the heuristics decide)."""

    generated: bool | None = None
    vendored: bool | None = None
    documentation: bool | None = None


UNSPECIFIED = Attributes()


# Paths per ``git check-attr`` call, in bytes of arguments: well inside every system's argument limit.
BATCH_BYTES = 64_000


def check_attr_args() -> list[str]:
    """The ``git`` arguments that report the marks of the paths that follow them."""
    return ["check-attr", "-z", *NAMES, "--"]


def batches(paths: Iterable[str]) -> Iterator[list[str]]:
    """``paths`` in groups small enough for one command line each."""
    batch: list[str] = []
    size = 0
    for path in paths:
        if batch and size + len(path) + 1 > BATCH_BYTES:
            yield batch
            batch, size = [], 0
        batch.append(path)
        size += len(path.encode("utf-8", errors="surrogateescape")) + 1
    if batch:
        yield batch


def _value(info: str) -> bool | None:
    if info == "unspecified":
        return None
    return info not in ("unset", "false")  # "set", "true", or any other value linguist takes as set


def parse(output: bytes) -> dict[str, Attributes]:
    """``git check-attr -z`` output (``path NUL attribute NUL info NUL`` triples) as marks by path; paths
    with every mark unspecified are left out."""
    fields = output.split(b"\0")
    marks: dict[str, dict[str, bool | None]] = {}
    for i in range(0, len(fields) - 2, 3):
        path = fields[i].decode("utf-8", errors="surrogateescape")
        name = fields[i + 1].decode("ascii", errors="replace")
        value = _value(fields[i + 2].decode("utf-8", errors="replace"))
        if name in NAMES and value is not None:
            marks.setdefault(path, {})[name.removeprefix("linguist-")] = value
    return {path: Attributes(**values) for path, values in marks.items()}
