"""Packing the second opinions: the one context packet, and verification tasks into verifier packets.

Pure. Verification tasks on one file travel together (the verifier reads it once), a packet holds at most
``MAX_VERIFY_TASKS`` of them and stays inside the token budget. Both kinds get the ``deep`` tier: a threat
model every packet relies on, and a second opinion on the most severe findings, deserve the strongest model.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from audit_mcp.engine.packets import PacketPlan, Unit, unit_tokens
from audit_mcp.store.records import Cell, FileRow

if TYPE_CHECKING:  # the prompts (and what they load) are for packets being written, not for counting them
    from audit_mcp.engine.opinion_prompts import VerifyTask

MAX_VERIFY_TASKS = 8
TOKENS_PER_VERIFICATION = 2_500  # the callers, guards and configuration a verifier reads, and its answer
CONTEXT_READING_TOKENS = 20_000  # what the context reviewer opens beyond its prompt
MAX_FILE_TOKENS = 20_000  # a verifier reads around the finding, not all of a huge file


def context_plan(cell: Cell, prompt_tokens: int) -> PacketPlan:
    tokens = prompt_tokens + CONTEXT_READING_TOKENS
    unit = Unit(cell.path, cell.start_line, cell.end_line, (cell,), tokens)
    return PacketPlan((unit,), tokens, "deep", "the threat model every review packet of the audit carries")


def _file_tokens(path: str, files: Mapping[str, FileRow]) -> int:
    row = files.get(path)
    return min(MAX_FILE_TOKENS, unit_tokens(row, 1, row.line_count)) if row is not None else 0


def pack_verifications(
    tasks: Sequence[VerifyTask], files: Mapping[str, FileRow], *, budget: int, prefix_tokens: int
) -> list[tuple[PacketPlan, list[VerifyTask]]]:
    """Verifier packets: tasks grouped by file, in path order, each packet inside ``budget``."""
    by_file: dict[str, list[VerifyTask]] = defaultdict(list)
    for task in tasks:
        by_file[task.cell.path].append(task)
    room = max(1, budget - prefix_tokens)
    packets: list[tuple[list[VerifyTask], int, set[str]]] = []
    for path in sorted(by_file):
        for task in sorted(by_file[path], key=lambda t: t.cell.task_id):
            paths = {f["file"] for f in task.findings}
            cost = TOKENS_PER_VERIFICATION * len(task.findings)
            current = packets[-1] if packets else None
            if current is not None:
                extra = cost + sum(_file_tokens(p, files) for p in paths - current[2])
                if len(current[0]) < MAX_VERIFY_TASKS and current[1] + extra <= room:
                    current[0].append(task)
                    packets[-1] = (current[0], current[1] + extra, current[2] | paths)
                    continue
            packets.append(([task], cost + sum(_file_tokens(p, files) for p in paths), paths))
    plans = []
    for members, used, _paths in packets:
        units = tuple(
            Unit(t.cell.path, t.cell.start_line, t.cell.end_line, (t.cell,), TOKENS_PER_VERIFICATION) for t in members
        )
        why = f"a second opinion on {len(members)} finding(s) or pair(s) at or above the verification threshold"
        plans.append((PacketPlan(units, prefix_tokens + used, "deep", why), members))
    return plans
