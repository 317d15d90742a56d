"""What the store holds, as plain records: every layer reads and writes these.

Rows come back from the store as frozen dataclasses; the states and verdicts
they carry are the fixed vocabularies below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple


class CellState(StrEnum):
    PENDING = "pending"
    ASSIGNED = "assigned"
    REVIEWED = "reviewed"
    NOT_APPLICABLE = "not_applicable"
    FAILED = "failed"
    SKIPPED = "skipped"
    # Reviewed by an earlier audit, and the content it saw is unchanged: its review and findings stand here.
    CARRIED = "carried"


class CellKind(StrEnum):
    """What a cell asks for: the threat model before review, a review, or a second opinion after it."""

    CONTEXT = "context"
    REVIEW = "review"
    VERIFY = "verify"


CONTEXT_TASK_ID = "C0001"  # the task id of an audit's one context cell

OPEN_STATES = (CellState.PENDING, CellState.ASSIGNED)
DONE_STATES = (CellState.REVIEWED, CellState.NOT_APPLICABLE, CellState.CARRIED)
VERDICTS = ("confirmed", "refuted")  # what a reviewer may say of an analyzer lead


class RunCell(NamedTuple):
    """What merging a run needs of each of its cells (a plain tuple: a run has tens of thousands)."""

    task_id: str
    path: str
    lens: str
    attempts: int
    kind: str
    subject: str | None


class CellBatch(NamedTuple):
    """Many cells given one new state (attempts unchanged), as ``Tx.update_cells`` writes them: a packet's
    cells reviewed with nothing more to record."""

    task_ids: Sequence[str]
    state: str
    run_id: str
    packet_id: str


@dataclass(frozen=True)
class Cell:
    task_id: str
    path: str
    start_line: int
    end_line: int
    lens: str
    state: str
    attempts: int
    run_id: str | None
    packet_id: str | None
    reason: str | None
    content_hash: str
    kind: str = CellKind.REVIEW
    # What a verify cell checks: ``finding:<fingerprint>`` or ``pair:<fingerprint>:<fingerprint>``.
    subject: str | None = None
    # The first task number of the review unit (file or chunk) that implies this cell, None for a cell that
    # is only a row (see ``store.units``); where the cell is stored, not what it is.
    unit: int | None = field(default=None, compare=False)


class CellUpdate(NamedTuple):
    """A cell's new state, as ``Tx.update_cells`` writes it (``attempts`` None: unchanged; a plain tuple: a
    merge writes tens of thousands)."""

    task_id: str
    state: str
    run_id: str | None = None
    packet_id: str | None = None
    reason: str | None = None
    attempts: int | None = None


@dataclass(frozen=True)
class Matrix:
    """The matrix in compact form: review units in order, each with the index of its set of lenses.

    Cell ``n`` (task id ``T{n:05d}``, counted from 1) is the n-th (unit, lens) pair, units in order and
    each unit's lenses in the order of its set. ``coverage.build_cells`` expands it; the store inserts it in one
    statement.
    """

    units: list[tuple[str, int, int, str, int]]  # path, start line, end line, content hash, lens set index
    lens_sets: list[tuple[str, ...]]


@dataclass(frozen=True)
class FileRow:
    path: str
    language: str
    size: int
    line_count: int
    sha256: str
    scope: str
    skip_reason: str | None
    kind: str = "source"  # engine.file_kinds.FileKind: which lenses can read it
    # What the file's status said when it was read (engine.file_stat), or None when it cannot vouch for the
    # bytes; not part of the row's identity.
    stat: str | None = field(default=None, compare=False)
    # The lines a chunk of the file may start at (its definitions, from the code map), comma-separated; only
    # for a file that is chunked, else None (engine.coverage.file_ranges).
    cuts: str | None = field(default=None, compare=False)


class EntryPoint(NamedTuple):
    """A way into the code the code map found: a route's handler, or a program's ``main``."""

    path: str
    line: int
    symbol: str
    how: str


class MapEdge(NamedTuple):
    """A code map edge as the store keeps it: its links encoded (``engine.codemap.model``), ``None`` for an
    edge stored before the map carried them."""

    src: str
    dst: str
    weight: int
    links: str | None


@dataclass(frozen=True)
class AuditRow:
    audit_id: int
    created_at: str
    root: str
    git_head: str | None
    git_dirty: bool
    manifest_digest: str
    lenses: list[str]
    host_caps: dict[str, Any]
    blocker: str | None
    synthesized_at: str | None
    abandoned_at: str | None = None
    abandon_reason: str | None = None


@dataclass(frozen=True)
class RunRow:
    run_id: str
    audit_id: int
    seq: int
    kind: str
    state: str
    created_at: str
    merged_at: str | None
    wave_size: int
    plan: dict[str, Any]


@dataclass(frozen=True)
class PacketRow:
    packet_id: str
    run_id: str
    seq: int
    state: str
    estimated_tokens: int
    model_tier: str
    tier_reason: str
    prompt_path: str
    kind: str = CellKind.REVIEW  # the kind of every cell the packet holds


@dataclass(frozen=True)
class Lead:
    """An analyzer's alert, imported as a place for a reviewer to check (not a finding)."""

    lead_id: str
    tool: str
    rule_id: str
    path: str
    start_line: int
    end_line: int
    level: str
    message: str
    cwes: tuple[str, ...] = ()
    help_uri: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "lead_id": self.lead_id,
            "tool": self.tool,
            "rule_id": self.rule_id,
            "file": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "level": self.level,
            "message": self.message,
            "cwes": list(self.cwes),
            "help_uri": self.help_uri,
        }


def lead_from_json(doc: Mapping[str, Any]) -> Lead:
    return Lead(
        doc["lead_id"],
        doc["tool"],
        doc["rule_id"],
        doc["file"],
        doc["start_line"],
        doc["end_line"],
        doc["level"],
        doc["message"],
        tuple(doc.get("cwes", ())),
        doc.get("help_uri"),
    )


@dataclass(frozen=True)
class Verdict:
    """A reviewer's verdict on one lead, from one task."""

    lead_id: str
    verdict: str
    reason: str
    packet_id: str
    task_id: str


@dataclass(frozen=True)
class ThreatModelRow:
    """The audit's threat model, as its context packet returned it (or carried from an earlier audit)."""

    task_id: str
    packet_id: str | None
    origin: str
    model: dict[str, Any]
    recorded_at: str


@dataclass(frozen=True)
class VerdictRow:
    """A verifier's answer for one verify cell: the verdict on a finding, or whether a pair is one defect."""

    task_id: str
    subject: str
    packet_id: str
    answer: dict[str, Any]


@dataclass(frozen=True)
class RuntimeEvidence:
    """Evidence from running the code, attached to a finding by its fingerprint (untrusted text, size-capped)."""

    evidence_id: int
    fingerprint: str
    verdict: str  # reproduced | not_reproduced
    payload: dict[str, Any]  # kind, command, output, source, added_by, truncated
    added_at: str


class EarlierFinding(NamedTuple):
    """A finding an earlier audit reported in the lines a cell re-reviews: shown to its reviewer as ``ref``
    (E1, E2 ...), kept open unless the reviewer shows it fixed or wrong, or its lines are gone."""

    task_id: str
    ref: str
    from_audit: int
    fingerprint: str
    finding: dict[str, Any]


class Resolution(NamedTuple):
    """How an earlier finding was resolved: ``fixed`` or ``wrong`` (a reviewer shown it said so, citing the
    code), or ``lines_gone`` (its evidence is no longer in its file); ``detail`` holds the reason and citation."""

    fingerprint: str
    how: str
    detail: dict[str, Any]
