"""The simulated world: code to review, the subagents that review it, a rate-limited provider, the lower bound.

A subagent reviewing a packet of S tokens makes 6 + S/4,000 + (0–4) calls with 2–10 s of tool time between
them, each re-sending a system prompt and its growing context: *cached* accounting charges only the new part
(Anthropic does not charge cache reads), *uncached* charges every input token. The provider refills three
token buckets continuously (requests, input and output tokens per minute, each holding one minute's worth;
the output bucket is charged ``max_tokens`` at admission and refunded the unused part) and answers a call
that does not fit with a 429, a ``retry-after`` and the API's message naming the limit it would exceed.
Optionally it also refuses a share of calls at random, with a short ``retry-after`` (a busy shared key).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass

TIERS = {  # requests/min, input tokens/min, output tokens/min
    "low": (50, 30_000, 8_000),
    "mid": (1_000, 450_000, 90_000),
    "high": (4_000, 2_000_000, 400_000),
}
MAX_TOKENS = 4_096
SYSTEM_PROMPT = 4_000  # every call re-sends the system prompt and tools
RANDOM_RETRY_AFTER = (1, 2)  # seconds a random 429 asks to wait


@dataclass(frozen=True)
class Call:
    input_tokens: int
    output_tokens: int
    latency: float
    tool_after: float


@dataclass(frozen=True)
class Packet:
    packet_id: str
    text_tokens: int
    calls: tuple[Call, ...]
    files: tuple[tuple[str, int], ...] = ()  # (file id, tokens) it reviews

    @property
    def duration(self) -> float:
        return sum(c.latency + c.tool_after for c in self.calls)

    @property
    def input_tokens(self) -> int:
        return sum(c.input_tokens for c in self.calls)


def make_packet(rng: random.Random, packet_id: str, size: int, max_tokens: int, cached: bool) -> Packet:
    """One subagent's calls over ``size`` tokens of code; it re-sends its growing context on every call.

    With ``cached`` (Anthropic prompt caching) only the new part of each call is charged to the input
    bucket; without it (OpenAI-style accounting) every input token is.
    """
    k = 6 + size // 4_000 + rng.randint(0, 4)
    calls = []
    context = 0
    for j in range(k):
        read = size * min(1.0, (j + 1) / max(1, k // 2))
        out = min(max_tokens, rng.randint(150, 700) if j < k - 1 else rng.randint(1_200, 2_500))
        full = int(SYSTEM_PROMPT + read + 250 * j)
        # Prompt caching: cache reads are not charged, only what is new since the last call (plus a little).
        charged = full if j == 0 or not cached else full - context + 300
        context = full
        calls.append(Call(charged, out, 1.0 + out / 70.0, rng.uniform(2.0, 10.0) if j < k - 1 else 0.0))
    return Packet(packet_id, size, tuple(calls))


def workload(rng: random.Random, n: int, budget: int, max_tokens: int, cached: bool) -> list[Packet]:
    """``n`` packets of roughly lognormal size up to ``budget``."""
    sizes = [int(min(budget, max(2_000, rng.lognormvariate(math.log(budget * 0.45), 0.5)))) for _ in range(n)]
    return [make_packet(rng, f"P{i:03d}", size, max_tokens, cached) for i, size in enumerate(sizes)]


def code(rng: random.Random, total: int) -> list[tuple[str, int]]:
    """Files of lognormal size (median 2.5k tokens) adding up to about ``total`` tokens, as (id, tokens)."""
    files: list[tuple[str, int]] = []
    size = 0
    while size < total:
        tokens = int(min(30_000, max(200, rng.lognormvariate(math.log(2_500), 1.0))))
        files.append((f"f{len(files):05d}", tokens))
        size += tokens
    return files


def pack(files: list[tuple[str, int]], budget: int) -> list[list[tuple[str, int]]]:
    """Files in order into packets of at most ``budget`` tokens; a larger file is cut into pieces first."""
    pieces = []
    for fid, tokens in files:
        parts = math.ceil(tokens / budget)
        pieces += [(fid if parts == 1 else f"{fid}.{i}", tokens // parts) for i in range(parts)]
    packets: list[list[tuple[str, int]]] = []
    size = budget
    for piece in pieces:
        if size + piece[1] > budget:
            packets.append([])
            size = 0
        packets[-1].append(piece)
        size += piece[1]
    return packets


def lower_bound(packets: list[Packet], limits: tuple[int, int, int], cap: int, kind: str) -> float:
    """No schedule finishes sooner: the longest run, the slots, and each bucket's refill (minus its burst).

    ``kind`` is what the host can do: a host that can refill slots as they free is bounded by the slots alone;
    one that waits for whole waves also by the sum of each wave's longest run (waves of ``cap``, longest first).
    """
    rpm, itpm, otpm = limits
    durations = sorted((p.duration for p in packets), reverse=True)
    tau = min(p.calls[-1].latency for p in packets)
    total_in = sum(p.input_tokens for p in packets)
    total_out = sum(c.output_tokens for p in packets for c in p.calls)
    total_calls = sum(len(p.calls) for p in packets)
    bounds = [
        durations[0],
        sum(durations) / cap,
        max(0.0, total_in - itpm) / (itpm / 60) + tau,
        max(0.0, total_out - otpm) / (otpm / 60) + tau,
        max(0.0, total_calls - rpm) / (rpm / 60) + tau,
    ]
    if kind == "whole_wave":
        bounds.append(sum(durations[k] for k in range(0, len(durations), cap)))
    return max(bounds)


def lone_run_outruns(packets: list[Packet], itpm: int) -> bool:
    """Whether a typical run, alone, draws input tokens faster than the bucket refills.

    Then 429s come from each subagent's own pace, which no width, order or launch pacing changes.
    """
    draw = sum(p.input_tokens / p.duration for p in packets) / len(packets)
    return draw > itpm / 60


class Provider:
    """Three continuous buckets; output reserved at ``max_tokens`` on admission; optional random 429s."""

    def __init__(
        self, limits: tuple[int, int, int], max_tokens: int, noise: float = 0.0, rng: random.Random | None = None
    ) -> None:
        self.max_tokens = max_tokens
        self.caps = [float(x) for x in limits]
        self.rates = [x / 60.0 for x in limits]
        self.levels = list(self.caps)
        self.at = 0.0
        self.short = 1  # the bucket that refused the last call (0 requests, 1 input, 2 output)
        self.noise = noise
        self.rng = rng or random.Random(0)

    def _refill(self, now: float) -> None:
        dt = now - self.at
        self.levels = [min(c, lv + r * dt) for c, lv, r in zip(self.caps, self.levels, self.rates, strict=True)]
        self.at = now

    def admit(self, now: float, input_tokens: int) -> float | None:
        """None when admitted, else the retry-after in seconds."""
        self._refill(now)
        if self.noise and self.rng.random() < self.noise:
            self.short = 0
            return float(self.rng.randint(*RANDOM_RETRY_AFTER))
        need = [1.0, float(input_tokens), float(self.max_tokens)]
        short = [
            ((n - lv) / r, i) for i, (n, lv, r) in enumerate(zip(need, self.levels, self.rates, strict=True)) if n > lv
        ]
        if short:
            wait, self.short = max(short)
            return float(max(1, math.ceil(wait)))
        self.levels = [lv - n for lv, n in zip(self.levels, need, strict=True)]
        return None

    def refund(self, now: float, unused: int) -> None:
        self._refill(now)
        self.levels[2] = min(self.caps[2], self.levels[2] + unused)

    def error_text(self, retry: float) -> str:
        """What a host shows for a packet that failed throttled: the API's message, which names the one limit
        the refused call would have exceeded (not the response headers), and the wait."""
        unit = ("requests", "input tokens", "output tokens")[self.short]
        message = (
            f"This request would exceed the rate limit for your organization of {int(self.caps[self.short]):,} "
            f"{unit} per minute."
        )
        body = json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": message}})
        return f"API Error: 429 {body} retry-after: {int(retry)}"
