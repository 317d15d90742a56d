"""The code map's facts cache in the store (``engine.codemap.facts_cache``): read whole, in one query, before
intake reads the repository; what intake parsed recorded with the audit it starts, and the rows that no file
of the latest audits has the bytes of dropped then. A forecast before any audit, and the check of another
host's checkout, read it and write nothing."""

from __future__ import annotations

from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.codemap.facts_cache import KEEP_AUDITS, FactsCache, Row, version
from audit_mcp.store.tx import Tx
from audit_mcp.usecases.workspace import Workspace


def read(ws: Workspace, config: SessionConfig, *, looking: bool = False) -> FactsCache | None:
    """The store's cached facts for this extraction, or ``None`` when the config turns the map off. When
    ``looking`` (a forecast, a check), a store not made yet stays unmade, and the cache is empty."""
    if not config.code_map:
        return None
    if looking:
        with ws.store_if_any() as tx:
            return FactsCache.load(*tx.code_facts(version()[0])) if tx is not None else FactsCache.load(b"", [])
    with ws.store.read() as tx:
        zdict, rows = tx.code_facts(version()[0])
    return FactsCache.load(zdict, rows)


def record(tx: Tx, cache: FactsCache | None, packed: tuple[bytes, list[Row]] | None) -> str:
    """In the write that records a new audit's manifest: the rows ``packed`` from what its intake parsed,
    then the rows no file of the latest ``KEEP_AUDITS`` audits uses dropped. What the ledger says of it."""
    if cache is None or packed is None:
        return ""
    zdict, rows = packed
    kept = not rows or tx.record_code_facts(cache.version, cache.label, zdict, rows)
    dropped = tx.prune_code_facts(cache.version, KEEP_AUDITS)
    return (
        f"; facts of {cache.hits} file(s) from the store's cache, {len(cache.parsed)} parsed"
        + (f" ({cache.ignored} cached row(s) unreadable, ignored)" if cache.ignored else "")
        + ("" if kept else " (not cached: the cache was given another dictionary meanwhile)")
        + (f", {dropped} cached row(s) no recent audit uses dropped" if dropped else "")
    )
