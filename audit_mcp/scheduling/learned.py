"""Learned rate-limit state per provider+model, in a small SQLite file outside any repository.

The file lives under the user's state directory (``$XDG_STATE_HOME/audit-mcp``
or ``~/.local/state/audit-mcp``); ``AUDIT_MCP_STATE_DIR`` overrides the
directory. Every update is a read-modify-write inside one transaction
(``store.keyed``), so concurrent processes serialise and lose nothing.

Every audit of the user reads this file, so one bad value would break them all.
Each document is checked against ``LearnedDoc`` (finite numbers in bounds,
timezone-aware times, a cooldown no longer than a provider's longest window)
when it is read and before it is written. One that fails is quarantined (kept
in the file's ``quarantine`` table with why), ``warnings`` says so (``quota``
shows it), and the scheduler goes on with the defaults. A file that is not a
database at all is worked around the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator

from audit_mcp.core.errors import StateError
from audit_mcp.core.userstate import state_dir
from audit_mcp.scheduling.claims import MAX_CLAIMS
from audit_mcp.scheduling.learning import MAX_LEARNED_CAP
from audit_mcp.scheduling.profile import Learned
from audit_mcp.scheduling.ratelimits import MAX_QUOTED_LIMIT, MAX_WAIT_SECONDS
from audit_mcp.store.keyed import Documents, KeyedDocuments

STATE_FILENAME = "learned.sqlite3"
_DATES = {f.name for f in fields(Learned) if "datetime" in str(f.type)}
_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
_LATEST = datetime(2200, 1, 1, tzinfo=UTC)


def _finite(low: float, high: float) -> Any:
    return Field(ge=low, le=high, allow_inf_nan=False)


_Sum = Annotated[float, _finite(-(10**18), 10**18)]  # a size fit's decayed sums (``sizefit.Fit``)
_Key = Annotated[str, Field(max_length=64)]
_Teacher = Annotated[str, Field(max_length=64)]
_Epoch = Annotated[float, _finite(_EARLIEST.timestamp(), _LATEST.timestamp())]


class LearnedDoc(BaseModel):
    """What a stored document may hold: the bounds every value of ``Learned`` is checked against."""

    model_config = ConfigDict(extra="ignore", strict=False)

    cap: Annotated[float, _finite(1, MAX_LEARNED_CAP)] | None = None
    updated_at: AwareDatetime | None = None
    cooldown_until: AwareDatetime | None = None
    last_429_at: AwareDatetime | None = None
    last_decrease_at: AwareDatetime | None = None
    hard_stop: Annotated[str, Field(max_length=2_000)] | None = None
    run_seconds: Annotated[float, _finite(0, MAX_WAIT_SECONDS)] | None = None
    input_ratio: Annotated[float, _finite(0, 10_000)] | None = None
    output_tokens: Annotated[float, _finite(0, 10_000_000)] | None = None
    calls: Annotated[float, _finite(0, 100_000)] | None = None
    observed_limits: dict[Annotated[str, Field(max_length=64)], Annotated[int, Field(gt=0, le=MAX_QUOTED_LIMIT)]] = (
        Field(default_factory=dict, max_length=16)
    )
    observed_at: AwareDatetime | None = None
    clean_runs: Annotated[int, Field(ge=0, le=10**9)] = 0
    rate_limited_runs: Annotated[int, Field(ge=0, le=10**9)] = 0
    threshold: Annotated[float, _finite(1, MAX_LEARNED_CAP)] | None = None
    throttled_width: Annotated[float, _finite(1, MAX_LEARNED_CAP)] | None = None
    throttled_repeats: Annotated[int, Field(ge=0, le=64)] = 0
    round_at: AwareDatetime | None = None
    round_clean: Annotated[int, Field(ge=0, le=10**6)] = 0
    window_calls: Annotated[float, _finite(0, 10**9)] = 0.0
    window_limited: Annotated[float, _finite(0, 10**9)] = 0.0
    window_at: AwareDatetime | None = None
    size_fits: dict[
        Literal["input_tokens", "output_tokens", "api_calls", "seconds"],
        tuple[_Sum, _Sum, _Sum, _Sum, _Sum, _Sum],
    ] = Field(default_factory=dict)
    window_input: Annotated[float, _finite(0, 10**15)] = 0.0
    window_seconds: Annotated[float, _finite(0, 10**12)] = 0.0
    inferred_limits: dict[Annotated[str, Field(max_length=64)], Annotated[int, Field(gt=0, le=MAX_QUOTED_LIMIT)]] = (
        Field(default_factory=dict, max_length=16)
    )
    inferred_at: AwareDatetime | None = None
    corroborated_limits: dict[
        Annotated[str, Field(max_length=64)], Annotated[int, Field(gt=0, le=MAX_QUOTED_LIMIT)]
    ] = Field(default_factory=dict, max_length=16)
    corroborated_at: AwareDatetime | None = None
    burst_runs: Annotated[int, Field(ge=0, le=MAX_LEARNED_CAP)] | None = None
    clean_width: Annotated[float, _finite(0, MAX_LEARNED_CAP)] | None = None
    observed_by: dict[_Key, tuple[_Teacher, ...]] = Field(default_factory=dict, max_length=16)
    inferred_by: dict[_Key, tuple[_Teacher, ...]] = Field(default_factory=dict, max_length=16)
    observations: dict[_Key, dict[_Teacher, Annotated[int, Field(gt=0, le=MAX_QUOTED_LIMIT)]]] = Field(
        default_factory=dict, max_length=16
    )
    claims: tuple[tuple[_Key, _Teacher, Annotated[float, _finite(0, 10**13)], _Epoch], ...] = Field(
        default=(), max_length=MAX_CLAIMS
    )

    @model_validator(mode="after")
    def _times_in_range(self) -> LearnedDoc:
        for name in _DATES:
            moment = getattr(self, name)
            if moment is not None and not _EARLIEST <= moment <= _LATEST:
                raise ValueError(f"{name} {moment.isoformat()} is not a plausible time")
        if self.cooldown_until is not None:
            since = self.updated_at or self.last_429_at
            if since is None or self.cooldown_until > since + timedelta(seconds=MAX_WAIT_SECONDS + 86_400):
                raise ValueError("cooldown_until is further off than any provider window")
        return self


def learned_state_path() -> Path:
    """Where learned rate-limit state lives: per user, outside any repository (``core.userstate``)."""
    return state_dir() / STATE_FILENAME


def state_key(provider: str, model: str, teacher: str = "") -> str:
    """The learned state's key: the provider and the model, whose limits it holds. A model that was not named
    (``unknown``) could be any model, so what its runs teach stays with the repository that learned it
    (``teacher``, ``claims``) instead of throttling every audit of every model that named none."""
    key = f"{provider}/{model}".lower()
    return f"{key}@{teacher}" if teacher and model.strip().lower() in ("", "unknown") else key


def _encode(learned: Learned) -> str:
    data = asdict(learned)
    for name in _DATES:
        if data[name] is not None:
            data[name] = data[name].isoformat()
    return json.dumps(data, sort_keys=True)  # NaN is written as NaN here, and refused by the check


def _parse(text: str) -> Learned | str:
    """The state in ``text``, or why it cannot be used."""
    try:
        doc = LearnedDoc.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the document"
        return f"{where}: {first['msg']}" + (f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else "")
    return Learned(**doc.model_dump())


def _problem(text: str) -> str | None:
    parsed = _parse(text)
    return parsed if isinstance(parsed, str) else None


def _decode(text: str | None) -> Learned:
    parsed = Learned() if text is None else _parse(text)
    return Learned() if isinstance(parsed, str) else parsed


class LearnedStore:
    """The learned state of every provider+model, one checked document each in a small SQLite file."""

    def __init__(self, path: Path | None = None, documents: Documents | None = None) -> None:
        """The user's file at ``path`` (default: ``learned_state_path()``), or ``documents`` another store
        keeps (a shared PostgreSQL store's, so a fleet on one API key learns together)."""
        self.path = path or learned_state_path()
        self._documents: Documents = documents or KeyedDocuments(self.path)
        self.location = self._documents.location
        self.warnings: list[str] = []

    def get(self, key: str) -> Learned:
        """The state of ``key``: defaults when there is none, or when it fails its check (then quarantined)."""
        try:
            return _decode(self._documents.get(key, _problem, _now()))
        except StateError as exc:
            self._warn(f"the learned state could not be read ({exc}); the scheduler uses its defaults")
            return Learned()

    def update(self, key: str, change: Callable[[Learned], Learned], now: datetime) -> Learned:
        """Apply ``change`` to the stored state atomically and return the result (a result that fails its
        check is quarantined, not stored, and the stored state is returned)."""
        try:
            stored = self._documents.update(key, lambda old: _encode(change(_decode(old))), _problem, now.isoformat())
        except StateError as exc:
            self._warn(f"the learned state could not be updated ({exc}); this run taught the scheduler nothing")
            return Learned()
        return _decode(stored)

    def notes(self, key: str) -> list[str]:
        """What a person should know about the state of ``key``: quarantined documents, unreadable files."""
        try:
            set_aside = self._documents.quarantined(key)
        except StateError as exc:
            set_aside = []
            self._warn(f"the learned state could not be read ({exc}); the scheduler uses its defaults")
        notes = list(self.warnings)
        if set_aside:
            at, why = set_aside[0]
            notes.append(
                f"The learned state for {key} failed its check ({why}) and was set aside at {at}, in the "
                f"quarantine table of {self.location} ({len(set_aside)} document(s) so far); the scheduler uses "
                "its defaults until it learns again. Nothing needs doing; clear that table to clear the record."
            )
        return notes

    def _warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)


def _now() -> str:
    return datetime.now(UTC).isoformat()
