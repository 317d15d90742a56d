"""What a dispatch prompt tells the host to do, for the way the host dispatches: a rolling host keeps N
subagents running and starts the next packet as one finishes; a whole-wave host launches a wave and waits for
all of it. Both check ``plan_status`` between launches."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rules:
    """What the dispatch prompt tells the host to do, for the way it dispatches."""

    launch: str
    pace: str
    check: str
    action: str


_SLEEP = (
    "(the model's per-minute token budget refills at that pace; if you have nothing else to do, wait with `sleep` "
    "in a shell)"
)
_STATUS = (
    "`failures` = the failures you noted since your last call, and `launched` = every packet id you have started "
    "so far; follow its `next_action`. Rate limits met (or their absence) since the plan was written can narrow "
    "or widen the width, set a cooldown, move start times, and name packets not to launch; the answer wins over "
    "this prompt. It also writes the prompt files of the packets to launch next: those of the first two waves "
    "(rolling: twice the width) exist now, and each later packet's file once `plan_status` (or `next_step`) has "
    "answered with that packet among the next to launch, so call it before every launch after the first ones."
)
_STATUS_CLI = (
    " Without MCP tools, run this, adding `--launched` with the ids of the packets you started, comma-separated "
    "(`--launched ID1,ID2`), and, only when packets failed, `--failures FILE` with those failures written to FILE "
    'as a JSON list of `{"packet_id": ..., "error": ...}` (leave `--failures` out when none failed):'
)


def rolling_rules(run_id: str, width: int, offsets: dict[str, float]) -> Rules:
    start = (
        f"Start the packets in the order listed below, each as its own subagent: the first {width} now, except any "
        "marked **start at +Ns**, which must not start sooner than N seconds after the first subagent of this run "
        f"started {_SLEEP}. Give each exactly this instruction:"
        if offsets
        else f"Start the first {width} packets listed below at once, each as its own subagent, with exactly this "
        "instruction:"
    )
    timed = ", not before its start time if it is marked with one" if offsets else ""
    return Rules(
        launch=start,
        pace=f"Keep {width} subagent(s) running: as soon as one finishes (submitted or failed), start the next "
        f"packet in the list{timed}. Do not wait for the others to finish, and never run more than {width} at once.",
        check="Each time a subagent finishes, before you start the next packet, call `plan_status` with "
        f"`run_id` = `{run_id}`, " + _STATUS + _STATUS_CLI,
        action=f"keep {width} subagent(s) running, one per packet, starting the next as soon as one finishes",
    )


def whole_wave_rules(run_id: str, offsets: dict[str, float]) -> Rules:
    start = (
        "Launch all the packets of the wave together, each as its own subagent. A wave whose packets are marked "
        "**start at +Ns** must not start sooner than N seconds after the first wave of this run started "
        f"{_SLEEP}. Give each exactly this instruction:"
        if offsets
        else "Launch every packet of the wave at once, each as its own subagent, with exactly this instruction:"
    )
    return Rules(
        launch=start,
        pace="Wait until every subagent of the wave has finished before you start the next wave.",
        check="Between waves, before you launch the next one, call `plan_status` with "
        f"`run_id` = `{run_id}`, "
        + _STATUS
        + " Its `waves` and `waiting` replace the waves below: launch the next wave it gives."
        + _STATUS_CLI,
        action="launch one subagent per packet, wave by wave, calling plan_status between waves",
    )


def opening(run_id: str, mode: str, outstanding: int, waves: list[int]) -> str:
    width = waves[0] if waves else 0
    if mode == "rolling":
        return (
            f"Launch one subagent per packet of run `{run_id}`, keeping {width} running and starting the next packet "
            f"as soon as one finishes, then merge the run and ask for the next step. {outstanding} packet(s), at "
            f"most {width} at a time."
        )
    return (
        f"Launch one subagent per packet of run `{run_id}`, wave by wave, then merge the run and ask for the next "
        f"step. {outstanding} packet(s) in {len(waves)} wave(s) of at most {width}."
    )
