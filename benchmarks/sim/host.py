"""The simulated host: it runs one run's packets as it is told, retrying throttled calls, and reports back.

At each point where a host decides what to start (the run's start, and whenever a subagent finishes or
fails) it asks its ``Controller`` for ``Orders``: how to dispatch (``rolling``: keep ``width`` subagents
running, refilling a slot as soon as one frees; ``whole_wave``: launch the next ``wave`` packets together
and wait for all of them), each packet's earliest start (seconds after the run's first start) and a
cooldown. A host that can only wait for whole waves does so whatever it is told. Each call refused with a
429 is retried after its ``retry-after`` (with up to 25% jitter, as clients add) up to ``HOST_RETRIES``
times; then the packet fails and the host reports the error text. A finished packet reports its ``usage``.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from benchmarks.sim.world import Packet, Provider

HOST_RETRIES = 10


@dataclass(frozen=True)
class Orders:
    """What the dispatch prompt (or a check between waves) tells the host to do now."""

    mode: str  # "rolling" or "whole_wave"
    width: int  # rolling: how many to keep running
    wave: int  # whole_wave: how many the next wave launches
    not_before: Mapping[str, float] = field(default_factory=dict)  # seconds after the run's first start
    resume_at: float = 0.0  # absolute: nothing starts before (a cooldown)
    hold: frozenset[str] = frozenset()  # not to be launched in this run (they go back to the queue)
    capacity: float = 0.0  # rolling: runs at once on average, the width's last slot paced (0: the width)


class Controller(Protocol):
    def orders(self, now: float, launched: int, waiting: frozenset[str]) -> Orders: ...

    def finished(self, packet: Packet, usage: dict[str, float], now: float) -> None: ...

    def failed(self, packet: Packet, error: str, now: float) -> None: ...


@dataclass
class RunResult:
    finished: dict[str, float] = field(default_factory=dict)  # packet id -> seconds it ran
    failed: dict[str, str] = field(default_factory=dict)  # packet id -> the error text the host saw
    throttled: dict[str, int] = field(default_factory=dict)  # rate-limited calls per packet, retries included
    calls: int = 0
    rate_limited: int = 0
    wasted_tokens: int = 0
    end: float = 0.0
    widths: list[float] = field(default_factory=list)  # the width (capacity) in force at each launch
    aborted: bool = False  # past the deadline: this run's outcome cannot matter
    held: list[str] = field(default_factory=list)  # packets the host was told not to launch


def usage_of(packet: Packet, seconds: float, throttled: int) -> dict[str, float]:
    """The ``usage`` block a finished packet's subagent sends with its submission."""
    return {
        "input_tokens": float(packet.input_tokens),
        "output_tokens": float(sum(c.output_tokens for c in packet.calls)),
        "api_calls": float(len(packet.calls)),
        "seconds": seconds,
        "rate_limited_calls": float(throttled),
    }


def run_packets(
    provider: Provider,
    packets: list[Packet],
    controller: Controller,
    can_roll: bool,
    start: float,
    rng: random.Random | None = None,
    deadline: float = float("inf"),
) -> RunResult:
    """One run of ``packets`` (in launch order) from ``start``, as ``controller`` directs; abandoned (``aborted``)
    once the clock passes ``deadline``."""
    jitter = rng or random.Random(0)
    out = RunResult(end=start)
    queue = list(packets)
    events: list[tuple[float, int, str, Packet | None, int, int]] = []
    seq = itertools.count()
    active = 0
    launched = 0
    first: float | None = None  # the run's first start: launch offsets count from it
    began: dict[str, float] = {}
    spent: dict[str, int] = {}

    def start_packet(packet: Packet, at: float) -> None:
        nonlocal active, launched, first
        active += 1
        launched += 1
        first = at if first is None else first
        began[packet.packet_id] = at
        spent[packet.packet_id] = 0
        heapq.heappush(events, (at, next(seq), "call", packet, 0, 0))

    def decide(now: float) -> None:
        orders = controller.orders(now, launched, frozenset(p.packet_id for p in queue))
        if orders.hold:
            out.held += [p.packet_id for p in queue if p.packet_id in orders.hold]
            queue[:] = [p for p in queue if p.packet_id not in orders.hold]
        mode = orders.mode if can_roll else "whole_wave"
        if mode == "whole_wave":
            if active or not queue:
                return
            wave = [queue.pop(0) for _ in range(min(max(1, orders.wave), len(queue)))]
            at = max(now, orders.resume_at)
            base = at if first is None else first
            for packet in wave:
                out.widths.append(len(wave))
                start_packet(packet, max(at, base + orders.not_before.get(packet.packet_id, 0.0)))
            return
        while queue and active < max(1, orders.width):
            base = first if first is not None else max(now, orders.resume_at)
            due = max(orders.resume_at, base + orders.not_before.get(queue[0].packet_id, 0.0))
            if due > now + 1e-9:
                heapq.heappush(events, (due, next(seq), "wake", None, 0, 0))
                return
            out.widths.append(min(orders.capacity, orders.width) if orders.capacity else max(1, orders.width))
            start_packet(queue.pop(0), now)

    decide(start)
    while events:
        now, _, what, packet, j, tries = heapq.heappop(events)
        if now > deadline:
            out.aborted = True
            out.end = now
            break
        if packet is None:  # a paced start or the end of a cooldown is due
            decide(now)
            continue
        call = packet.calls[j]
        if what == "call":
            out.calls += 1
            retry = provider.admit(now, call.input_tokens)
            if retry is None:
                spent[packet.packet_id] += call.input_tokens
                heapq.heappush(events, (now + call.latency, next(seq), "done", packet, j, 0))
                continue
            out.rate_limited += 1
            out.throttled[packet.packet_id] = out.throttled.get(packet.packet_id, 0) + 1
            if tries >= HOST_RETRIES:
                error = provider.error_text(retry)
                out.failed[packet.packet_id] = error
                out.wasted_tokens += spent[packet.packet_id]
                active -= 1
                out.end = max(out.end, now)
                controller.failed(packet, error, now)
                decide(now)
                continue
            wait = retry * jitter.uniform(1.0, 1.25) if retry <= 60 else min(60.0, 2.0**tries)
            heapq.heappush(events, (now + wait, next(seq), "call", packet, j, tries + 1))
            continue
        provider.refund(now, provider.max_tokens - call.output_tokens)
        if j + 1 < len(packet.calls):
            heapq.heappush(events, (now + call.tool_after, next(seq), "call", packet, j + 1, 0))
            continue
        seconds = now - began[packet.packet_id]
        out.finished[packet.packet_id] = seconds
        active -= 1
        out.end = max(out.end, now)
        controller.finished(packet, usage_of(packet, seconds, out.throttled.get(packet.packet_id, 0)), now)
        decide(now)
    return out


class Fixed:
    """A fixed width and the host's own way of dispatching: no pacing, no cooldown, nothing learned."""

    def __init__(self, width: int, mode: str) -> None:
        self.width, self.mode = width, mode

    def orders(self, now: float, launched: int, waiting: frozenset[str]) -> Orders:
        return Orders(self.mode, self.width, self.width)

    def finished(self, packet: Packet, usage: dict[str, float], now: float) -> None:
        return None

    def failed(self, packet: Packet, error: str, now: float) -> None:
        return None
