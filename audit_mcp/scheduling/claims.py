"""What one audit's word may teach the learned state every audit of the user shares: bounds and corroboration.

Every audit of the user on a provider+model reads the same learned state, and what feeds it is untrusted: the
error texts a host reports are what its subagents saw, and the repository under audit can put words in their
mouths; a headless worker's output can echo a file of the repository. So what one audit (one repository:
the *teacher*, a digest of its identity) teaches is bounded:

- a wait (``retry-after``, the reset of an exhausted bucket) of at most ``MAX_UNCORROBORATED_WAIT``: the
  longest reset a provider documents for a per-minute bucket (OpenAI's ``x-ratelimit-reset-tokens: 6m0s``;
  Anthropic's per-minute buckets refill in a minute). Hours or days are subscription windows and spend caps,
  which the text names as such (hard stops), never a per-minute bucket's wait;
- a limit (quoted in headers or a 429 message, or inferred from throttled runs) no lower than a quarter
  (``MAX_UNCORROBORATED_DECREASE``) of what is known without this audit's word: the built-in table, the
  configured value, and what other audits observed, whichever is highest. Priors wrong by up to 4x are the
  range the scheduler is built to meet; a key 4x below the lowest tier of the table is not one a single
  repository's text can claim.

A text that claims more is *held*: recorded as a claim (teacher, value, time) and not acted on at all, neither
its limit, nor its wait, nor its 429: the audit that saw it waits its own bounded cooldown (``bounded_wait``)
and nothing else changes. When another audit (a different teacher) claims as much within one learning
half-life, the claim is corroborated and applies, at what both say: the higher of the two lowest limits, the
earlier of the two latest waits. A value the user configured is obeyed whatever any text says, so it needs
no corroboration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from audit_mcp.scheduling.limits import ResolvedLimits, built_in
from audit_mcp.scheduling.profile import PER_MINUTE, Learned

MAX_UNCORROBORATED_WAIT = 360.0  # seconds: the longest reset a provider documents for a per-minute bucket
MAX_UNCORROBORATED_DECREASE = 4.0  # one audit's word lowers a limit to a quarter of what is known, no further
MAX_CLAIMS = 32  # claims kept per provider+model (the oldest go first)
MAX_SUPPORT = 8  # teachers named behind one value
WAIT = "wait"
INFERRED = "inferred:"  # a claim kind's prefix for a limit inferred from throttled runs


@dataclass(frozen=True)
class Verdict:
    """What a text may teach now: the state with its claims recorded (and any corroborated one applied), the
    limits to obey with the teachers behind each, the end of the wait to observe, and whether it is held."""

    state: Learned
    limits: dict[str, tuple[int, tuple[str, ...]]]
    until: datetime | None
    held: bool


def bounded_wait(until: datetime | None, now: datetime) -> datetime | None:
    """A wait one audit's text may impose (on that audit alone, or on every audit when corroborated)."""
    if until is None:
        return None
    return min(until, now + timedelta(seconds=MAX_UNCORROBORATED_WAIT))


def reference(state: Learned, key: str, base: ResolvedLimits | None, teacher: str) -> float:
    """The limit known without ``teacher``'s word: the built-in table, the configured value (a repository's
    own config cannot lower it below the table), and what other teachers observed, whichever is highest."""
    known = [float(built_in(key))]
    if base is not None and key in base.limits:
        known.append(float(base.value(key)))
    known += [float(v) for t, v in state.observations.get(key, {}).items() if t != teacher]
    if key in state.observed_limits and not state.observed_by.get(key):  # observed before teachers were kept
        known.append(float(state.observed_limits[key]))
    return max(known)


def observed(state: Learned, taught: Mapping[str, tuple[int, tuple[str, ...]]], now: datetime) -> Learned:
    """``state`` with the limits a text taught (``Verdict.limits``), the teachers behind each, and each
    teacher's observation kept for later judgements (``reference``)."""
    if not taught:
        return state
    observations = {key: dict(seen) for key, seen in state.observations.items()}
    for key, (value, by) in taught.items():
        seen = observations.setdefault(key, {})
        for teacher in by:
            seen.pop(teacher, None)
            seen[teacher] = value
        observations[key] = dict(list(seen.items())[-MAX_SUPPORT:])
    return replace(
        state,
        observed_limits={**state.observed_limits, **{k: v for k, (v, _by) in taught.items()}},
        observed_by={**state.observed_by, **{k: by for k, (_v, by) in taught.items()}},
        observations=observations,
        observed_at=now,
    )


def floor(state: Learned, key: str, base: ResolvedLimits | None, teacher: str) -> float:
    """The lowest value of ``key`` one teacher's word is believed for."""
    return reference(state, key, base, teacher) / MAX_UNCORROBORATED_DECREASE


def weigh(
    state: Learned,
    limits: Mapping[str, int],
    until: datetime | None,
    now: datetime,
    *,
    teacher: str,
    base: ResolvedLimits | None,
    half_life: timedelta,
    kind_prefix: str = "",
) -> Verdict:
    """Judge what one text says (the ``limits`` it quotes, the end of the wait it asks for) by ``teacher``'s
    bounds; claims past them are recorded in the returned state and are corroborated or held."""
    state = _live(state, now, half_life)
    taught: dict[str, tuple[int, tuple[str, ...]]] = {}
    held = False
    for key, value in limits.items():
        if key not in PER_MINUTE or value <= 0:
            continue
        if value >= floor(state, key, base, teacher):
            taught[key] = (int(value), (teacher,))
            continue
        state = _claimed(state, kind_prefix + key, teacher, float(value), now)
        agreed = _agreed(state, kind_prefix + key, lowest=True)
        if agreed is None:
            held = True
        else:
            taught[key] = (int(agreed[0]), agreed[1])
    wait = until
    if until is not None and (until - now).total_seconds() > MAX_UNCORROBORATED_WAIT:
        state = _claimed(state, WAIT, teacher, until.timestamp(), now)
        agreed = _agreed(state, WAIT, lowest=False)
        if agreed is None:
            held, wait = True, bounded_wait(until, now)
        else:
            wait = min(until, datetime.fromtimestamp(agreed[0], UTC))
    return Verdict(state, {} if held else taught, wait, held)


def held_claims(state: Learned, now: datetime, half_life: timedelta) -> list[str]:
    """Each live claim no other audit has corroborated, in words for ``quota`` and a forecast."""
    live = _live(state, now, half_life)
    out = []
    for kind in sorted({c[0] for c in live.claims}):
        if _agreed(live, kind, lowest=kind != WAIT) is not None:
            continue
        for _kind, _teacher, value, at in (c for c in live.claims if c[0] == kind):
            when = datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
            if kind == WAIT:
                end = datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
                out.append(
                    f"one audit's error text at {when} asked to wait until {end}: held, since no other audit saw "
                    f"such a wait (one audit's text may make the model wait at most {MAX_UNCORROBORATED_WAIT:.0f}s)"
                )
            else:
                name = kind.removeprefix(INFERRED)
                how = "throttled runs of one audit showed" if kind.startswith(INFERRED) else "one audit's text quoted"
                out.append(
                    f"{how} {name} = {value:,.0f} at {when}: held, not obeyed, since it is more than "
                    f"{MAX_UNCORROBORATED_DECREASE:g}x below what is otherwise known and no other audit saw it; if "
                    f"the account really allows that little, set {name} under [model] in your config"
                )
    return out


def _live(state: Learned, now: datetime, half_life: timedelta) -> Learned:
    """``state`` without claims older than one learning half-life (a wait claim also ends with its wait)."""
    start = (now - half_life).timestamp()
    kept = tuple(c for c in state.claims if c[3] >= start and (c[0] != WAIT or c[2] > now.timestamp()))
    return state if kept == state.claims else replace(state, claims=kept)


def _claimed(state: Learned, kind: str, teacher: str, value: float, now: datetime) -> Learned:
    """``state`` with ``teacher``'s latest claim of ``kind`` (one per teacher and kind, the newest kept)."""
    others = tuple(c for c in state.claims if (c[0], c[1]) != (kind, teacher))
    claims = (*others, (kind, teacher, value, now.timestamp()))
    return replace(state, claims=claims[-MAX_CLAIMS:])


def _agreed(state: Learned, kind: str, *, lowest: bool) -> tuple[float, tuple[str, ...]] | None:
    """What at least two teachers' claims of ``kind`` agree on, and the teachers behind it: for a limit (the
    lowest is the strongest claim) the second lowest, for a wait the second latest; None with fewer than two."""
    claims = sorted((c for c in state.claims if c[0] == kind), key=lambda c: c[2], reverse=not lowest)
    if len({c[1] for c in claims}) < 2:
        return None
    value = claims[1][2]
    behind = tuple(sorted({c[1] for c in claims if (c[2] <= value if lowest else c[2] >= value)}))
    return value, behind[:MAX_SUPPORT]
