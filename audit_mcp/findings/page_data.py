"""What the audit page shows, as one JSON document: the report, the coverage map, the runs, what remains.

Pure: the report's input, the cells and the runs' records in, a plain document out; ``page`` renders it.
The map is compact so that a 20,000-file audit's page stays a few megabytes: directories once, each file
as its directory's index, its name and its units (the file, or its chunks), each unit's cell states as one
character per lens (an index into the document's ``states``; ``.`` where the lens does not read the unit).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any

from audit_mcp.findings.report import ReportInput, honesty_notes, render_json
from audit_mcp.store.records import CellState, FileRow

CellStates = tuple[str, int, int, str, str]  # a review cell as the map draws it: path, start, end, lens, state

PAGE_SCHEMA_VERSION = "audit-mcp.page/1"

# The states the map colours, in legend order: a new state is one entry here (its key, its label, its colour,
# and whether a cell in it is done, still open, or a gap). A state the table does not name still shows, in a
# neutral colour under its own name; one that is not a ``CellState`` is listed only when some cell is in it.
STATE_STYLES: tuple[tuple[str, str, str, str], ...] = (
    ("reviewed", "reviewed", "#2da44e", "done"),
    ("carried", "carried (unchanged since an earlier audit, its review kept)", "#8fd19e", "done"),
    ("not_applicable", "not applicable", "#a8b1bb", "done"),
    ("failed", "failed", "#cf222e", "gap"),
    ("skipped", "skipped", "#d4a72c", "gap"),
    ("assigned", "assigned (in review now)", "#54aeff", "open"),
    ("pending", "pending", "#e6e9ed", "open"),
)
UNKNOWN_STATE_COLOUR = "#8250df"
_CODES = "0123456789abcdefghijklmnopqrstuvwxyz"
NO_CELL = "."  # the lens does not read this unit
MAX_GAPS_LISTED = 200  # gap cells named in the page's list; the map shows every one
MAX_REASON_CHARS = 300


def state_table(counts: Mapping[str, int]) -> list[dict[str, Any]]:
    """The legend: every known cell state and any other state some cell is in, each with its count."""
    known = {key for key, *_ in STATE_STYLES}
    out = [
        {"key": key, "label": label, "colour": colour, "group": group, "count": int(counts.get(key, 0))}
        for key, label, colour, group in STATE_STYLES
        if key in {s.value for s in CellState} or counts.get(key)
    ]
    out += [
        {"key": key, "label": key.replace("_", " "), "colour": UNKNOWN_STATE_COLOUR, "group": "other", "count": int(n)}
        for key, n in sorted(counts.items())
        if key not in known and n
    ]
    if len(out) > len(_CODES):
        raise ValueError(f"{len(out)} cell states cannot be coded in one character each")
    return out


def coverage_map(lenses: Sequence[str], cells: Iterable[CellStates], skipped: Sequence[FileRow] = ()) -> dict[str, Any]:
    """The review cells as the page's map: the lenses (the audit's, then any other a cell names), the state
    legend with counts, the directories, and each file with its units (or, skipped at intake, its reason)."""
    cells = sorted(cells)  # by path, then unit: a file's units come together, in order
    counts = Counter(c[4] for c in cells)
    order = list(dict.fromkeys([*lenses, *sorted({c[3] for c in cells} - set(lenses))]))
    column = {lens: n for n, lens in enumerate(order)}
    states = state_table(counts)
    code = {s["key"]: _CODES[i] for i, s in enumerate(states)}
    units: dict[str, list[list[Any]]] = {}
    for (path, start, end), unit in groupby(cells, key=itemgetter(0, 1, 2)):
        codes = [NO_CELL] * len(order)
        for cell in unit:
            codes[column[cell[3]]] = code[cell[4]]
        units.setdefault(path, []).append([start, end, "".join(codes)])
    reasons = {f.path: (f.skip_reason or "skipped at intake")[:MAX_REASON_CHARS] for f in skipped}
    places = [(path, *path.rpartition("/")) for path in sorted(set(units) | set(reasons))]
    parents = {parent for _path, parent, _sep, _name in places}
    dirs = sorted(parents | {a for parent in parents for a in _ancestors(parent)})
    index = {d: i for i, d in enumerate(dirs)}
    files = [
        [index[parent], name, units[path]] if path in units else [index[parent], name, [], reasons[path]]
        for path, parent, _sep, name in places
    ]
    return {"lenses": order, "states": states, "cells": len(cells), "dirs": dirs, "files": files}


def _ancestors(directory: str) -> list[str]:
    """Every directory above ``directory``, the root (``""``) included."""
    parts = directory.split("/") if directory else []
    return ["/".join(parts[:n]) for n in range(len(parts))]


def page_document(
    report: ReportInput,
    cells: Iterable[CellStates],
    *,
    runs: Sequence[Mapping[str, Any]] = (),
    forecast: Mapping[str, Any] | None = None,
    usage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything the page shows: the JSON report's members (its gap list cut to ``MAX_GAPS_LISTED``), the
    honesty notes, the coverage map, the runs, the forecast of what remains and the usage reported so far."""
    doc = render_json(report)
    gaps = doc.pop("gaps")
    doc.pop("leads", None)  # the Markdown and JSON reports carry the analyzer leads; the page counts them
    doc["report_schema_version"], doc["schema_version"] = doc["schema_version"], PAGE_SCHEMA_VERSION
    doc["notes"] = [note.removeprefix("> ").replace("**", "") for note in honesty_notes(report)]
    doc["blocker"] = report.blocker
    doc["leads"] = {"total": len(report.leads)}
    doc["gaps"] = {
        "cells": gaps["cells"][:MAX_GAPS_LISTED],
        "cells_total": len(gaps["cells"]),
        "skipped_files_total": len(gaps["skipped_files"]),
    }
    doc["map"] = coverage_map(report.lenses, cells, report.skipped_files)
    doc["runs"] = [dict(r) for r in runs]
    doc["forecast"] = dict(forecast) if forecast else None
    doc["usage"] = dict(usage) if usage else None
    return doc
