"""Where each limit a schedule obeys came from, in the words a forecast gives it.

Every per-minute limit is one of: ``configured`` (the session config or the environment), ``table`` (the
built-in defaults, a guess that does not bind), ``table, borne out by throttling`` (a guess runs were refused
at, which binds for a while), ``learned from rate-limit headers`` (quoted by a provider's headers or 429
message), ``learned from throttling`` (what throttled runs drew, below a configured value) or ``read from the
provider`` (the provider probe). A learned limit also says who stands behind it: one audit, or several that
corroborated a claim past what one audit may teach (``claims``).
"""

from __future__ import annotations

from typing import Any

from audit_mcp.scheduling.limits import Limit, ResolvedLimits
from audit_mcp.scheduling.profile import (
    CORROBORATED_SOURCE,
    INFERRED_SOURCE,
    OBSERVED_SOURCE,
    PER_MINUTE,
    PROBE,
    Learned,
    support,
)

CONFIGURED = "configured"
TABLE = "table"
BORNE_OUT = "table, borne out by throttling"
HEADERS = "learned from rate-limit headers"
THROTTLING = "learned from throttling"
PROVIDER = "read from the provider"


def origin(limit: Limit) -> str:
    """Which kind of source a limit has (without who stands behind a learned one)."""
    source = limit.source
    if source.startswith(("session config", "environment")):
        return CONFIGURED
    if source.startswith(INFERRED_SOURCE):
        return THROTTLING
    if source.startswith(CORROBORATED_SOURCE):
        return BORNE_OUT
    if source.startswith(OBSERVED_SOURCE) or "(probe)" in source:
        return HEADERS
    return TABLE


def limit_sources(limits: ResolvedLimits, learned: Learned) -> dict[str, dict[str, Any]]:
    """Each per-minute limit's value, where it came from (``from``, with who stands behind a learned one), its
    source as written, and whether it binds (a table's guess does not: the learned width answers for it)."""
    out: dict[str, dict[str, Any]] = {}
    for key in PER_MINUTE:
        limit = limits.limits[key]
        kind = origin(limit)
        by = {HEADERS: learned.observed_by.get(key), THROTTLING: learned.inferred_by.get(key)}.get(kind)
        if kind == HEADERS and (PROBE in (by or ()) or "(probe)" in limit.source):
            said = PROVIDER
        elif by is not None or kind in (HEADERS, THROTTLING):
            said = f"{kind} ({support(by or ())})"
        else:
            said = kind
        out[key] = {
            "value": limit.value,
            "from": said,
            "source": limit.source,
            "binds": limit.confidence != "low",
        }
    return out
