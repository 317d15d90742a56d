"""Work blocks: findings grouped into units of change, each one change a developer would make.

Pure: findings in, blocks out. Two findings belong to one block when one change settles both:

- the **same function** (same file and enclosing symbol): one edit of that function;
- the **same helper**: they name the same place among their related locations (the shared sink or helper
  both reach), or one names the other's place; fixing the helper fixes its callers;
- the **same missing control at sibling call sites**: the same category, in the same directory, at calls
  of the same function (``cursor.execute(`` at three sites that all need bound parameters).

Sharing a CWE in a directory is not enough: four different fixes are four blocks. Blocks are ordered by
severity, then by how well the second opinions stand behind them (reproduced first), then by size.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Sequence

from audit_mcp.core.taxonomy import describe
from audit_mcp.findings.model import CONFIDENCE_RANK, SEVERITY_RANK, STATUS_RANK, Finding, WorkBlock

_CALL = re.compile(r"([A-Za-z_$][\w$]*)\s*\(")
# Calls too common to say anything about the control a site lacks.
_GENERIC_CALLS = frozenset(
    [
        "if",
        "for",
        "while",
        "return",
        "print",
        "len",
        "str",
        "int",
        "float",
        "bool",
        "list",
        "dict",
        "set",
        "tuple",
        "get",
        "join",
        "format",
        "append",
        "extend",
        "split",
        "strip",
        "replace",
        "items",
        "keys",
        "values",
        "isinstance",
        "range",
        "enumerate",
        "zip",
        "map",
        "filter",
        "sorted",
        "min",
        "max",
        "sum",
        "any",
        "all",
        "super",
        "log",
        "debug",
        "info",
        "warn",
        "warning",
        "error",
        "push",
        "pop",
        "then",
        "catch",
        "function",
        "require",
        "toString",
        "String",
        "Number",
        "Object",
    ]
)


def rank(f: Finding) -> tuple[int, int, int, str, int]:
    """How urgent a finding is: severity, then the second opinions' standing, then confidence, then place."""
    return (
        SEVERITY_RANK[f.severity],
        STATUS_RANK.get(f.status, 3),
        CONFIDENCE_RANK[f.confidence],
        f.file,
        f.start_line,
    )


def _calls(f: Finding) -> set[str]:
    return {name for name in _CALL.findall(f.evidence) if name not in _GENERIC_CALLS}


def _places(f: Finding) -> set[tuple[str, int, int]]:
    return {(r["file"], r["start_line"], r["end_line"]) for r in f.related_locations}


def _touch(a: tuple[str, int, int], b: tuple[str, int, int]) -> bool:
    return a[0] == b[0] and a[1] <= b[2] and b[1] <= a[2]


class _Groups:
    """Union-find over finding indexes, remembering why two were joined."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def _same_function(a: Finding, b: Finding) -> bool:
    return bool(a.symbol) and a.file == b.file and (a.symbol or "").strip() == (b.symbol or "").strip()


def _same_helper(a: Finding, b: Finding) -> bool:
    pa, pb = _places(a), _places(b)
    own_a = {(a.file, x, y) for x, y in a.locations}
    own_b = {(b.file, x, y) for x, y in b.locations}
    return any(_touch(x, y) for x in pa for y in pb | own_b) or any(_touch(x, y) for x in pb for y in own_a)


def _siblings(a: Finding, b: Finding) -> set[str]:
    """The calls two findings of one category share in one directory (empty when they are not siblings)."""
    if a.category_id != b.category_id or posixpath.dirname(a.file) != posixpath.dirname(b.file):
        return set()
    return _calls(a) & _calls(b)


def _describe(members: Sequence[Finding]) -> tuple[str, str]:
    """The block's title and why its findings are one change."""
    first = members[0]
    if len(members) == 1:
        return first.title, "one finding"
    if all(_same_function(first, m) for m in members[1:]):
        return (
            f"{len(members)} findings in {first.symbol} ({first.file})",
            f"the same function `{first.symbol}` in {first.file}",
        )
    places = set.intersection(*(_places(m) | {(m.file, a, b) for a, b in m.locations} for m in members))
    if places:
        path, start, _ = sorted(places)[0]
        return f"{len(members)} findings through the helper at {path}:{start}", f"the same helper at {path}:{start}"
    shared = set.intersection(*(_calls(m) for m in members))
    if len({m.category_id for m in members}) == 1 and shared:
        call = sorted(shared)[0]
        entry = describe(first.category_id)
        where = posixpath.dirname(first.file) or "."
        return (
            f"{entry.name}: the same missing control at {len(members)} call sites of {call}() in {where}/",
            f"the same missing control at sibling calls of `{call}()`",
        )
    files = sorted({m.file for m in members})
    return (
        f"{len(members)} findings settled by one change in {', '.join(files[:3])}",
        "linked through a shared function, helper or call",
    )


def _candidates(findings: Sequence[Finding]) -> list[tuple[int, int]]:
    """The pairs (i < j) that may be one change: those that share a file (the place of one, or a related
    location of either) or a category in one directory. Every other pair fails all three tests (each needs one
    of these), so an audit with many findings compares them by neighbourhood, not each with each."""
    near: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, f in enumerate(findings):
        keys = {("file", f.file), ("siblings", f.category_id, posixpath.dirname(f.file))}
        keys |= {("file", r["file"]) for r in f.related_locations}
        for key in keys:
            near[key].append(i)
    pairs = {(a, b) for members in near.values() for n, a in enumerate(members) for b in members[n + 1 :]}
    return sorted(pairs)


def work_blocks(findings: Sequence[Finding]) -> list[WorkBlock]:
    """The findings grouped into units of change, in the suggested order (most urgent first)."""
    groups = _Groups(len(findings))
    for i, j in _candidates(findings):
        a, b = findings[i], findings[j]
        if _same_function(a, b) or _same_helper(a, b) or _siblings(a, b):
            groups.join(i, j)
    members: dict[int, list[Finding]] = defaultdict(list)
    for i, f in enumerate(findings):
        members[groups.find(i)].append(f)
    blocks = []
    for group in members.values():
        group.sort(key=rank)
        title, basis = _describe(group)
        files = sorted({m.file for m in group})
        one_place = len(group) == 1 or basis.startswith("the same function")
        effort = "small" if one_place else "medium" if len(files) <= 3 else "large"
        blocks.append((rank(group[0])[:2], -len(group), group[0].finding_id, title, basis, effort, group, files))
    blocks.sort(key=lambda b: (b[0], b[1], b[2]))
    return [
        WorkBlock(f"W{i:02d}", title, group[0].severity, effort, [m.finding_id for m in group], files, i, basis)
        for i, (_r, _n, _id, title, basis, effort, group, files) in enumerate(blocks, 1)
    ]
