"""The import graph of an audit: its edges in order, indexed by file once for every packet that reads it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import overload


class ImportGraph(Sequence[tuple[str, str]]):
    """``(importer, imported)`` pairs, in the order given, with each file's imports and importers (in that
    order) looked up without a scan of every edge."""

    def __init__(self, edges: Iterable[tuple[str, str]]) -> None:
        self._edges = list(edges)
        self._imports: dict[str, list[str]] | None = None
        self._imported_by: dict[str, list[str]] = {}

    def _index(self) -> dict[str, list[str]]:
        if self._imports is None:
            self._imports = {}
            for src, dst in self._edges:
                self._imports.setdefault(src, []).append(dst)
                self._imported_by.setdefault(dst, []).append(src)
        return self._imports

    def imports(self, path: str) -> list[str]:
        return self._index().get(path, [])

    def imported_by(self, path: str) -> list[str]:
        self._index()
        return self._imported_by.get(path, [])

    @overload
    def __getitem__(self, index: int) -> tuple[str, str]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[tuple[str, str]]: ...
    def __getitem__(self, index: int | slice) -> tuple[str, str] | Sequence[tuple[str, str]]:
        return self._edges[index]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._edges)

    def __len__(self) -> int:
        return len(self._edges)
