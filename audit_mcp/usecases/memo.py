"""Results computed from one read of the store, kept while the queue's generation stands.

A forecast packs the next run from the queue, the manifest and the import graph: all of it store state, so
the packing holds until a write transaction that may change it commits (``store.generation``: any write but
one that only records a packet's answer), in this process or any other. ``status`` and ``quota`` between two
such changes then cost the reads of counts, not a packing of the whole run, while subagents submit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Memo:
    """The latest value of each named computation, with the key (generation included) it was computed for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[Hashable, Any]] = {}

    def get(self, name: str, key: Hashable, compute: Callable[[], T], *, keep: Callable[[T], bool] | None = None) -> T:
        """``compute()``'s value for ``key``: kept from the last call with that key, else computed now (and kept
        unless ``keep`` says the value depends on more than the key)."""
        with self._lock:
            entry = self._entries.get(name)
        if entry is not None and entry[0] == key:
            value: T = entry[1]
            return value
        value = compute()
        if keep is None or keep(value):
            with self._lock:
                self._entries[name] = (key, value)
        return value


class Counts(Protocol):
    """The store's cell counts (``Tx``): coverage by state, by kind and state, review cells by lens and state."""

    def queue_generation(self) -> tuple[str, int]: ...
    def cell_counts_by_kind(self, audit_id: int) -> dict[str, dict[str, int]]: ...
    def cell_counts_by_lens(self, audit_id: int) -> dict[str, dict[str, int]]: ...


def cell_counts(memo: Memo, tx: Counts, audit_id: int) -> dict[str, int]:
    """``tx.cell_counts``, summed from ``cell_counts_by_kind`` (status, quota and the forecast ask for both)."""
    out: dict[str, int] = {}
    for by_state in cell_counts_by_kind(memo, tx, audit_id).values():
        for state, n in by_state.items():
            out[state] = out.get(state, 0) + n
    return out


def cell_counts_by_kind(memo: Memo, tx: Counts, audit_id: int) -> dict[str, dict[str, int]]:
    counted = memo.get(
        "cell_counts_by_kind", (tx.queue_generation(), audit_id), lambda: tx.cell_counts_by_kind(audit_id)
    )
    return {k: dict(v) for k, v in counted.items()}


def cell_counts_by_lens(memo: Memo, tx: Counts, audit_id: int) -> dict[str, dict[str, int]]:
    counted = memo.get(
        "cell_counts_by_lens", (tx.queue_generation(), audit_id), lambda: tx.cell_counts_by_lens(audit_id)
    )
    return {k: dict(v) for k, v in counted.items()}
