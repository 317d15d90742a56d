"""Checks on identifiers and free text that arrive from outside, before they reach the store."""

from __future__ import annotations

MAX_ID_CHARS = 200


def id_problem(name: str, value: object) -> str | None:
    """Why ``value`` cannot be a run or packet id, or ``None`` when it can."""
    if not isinstance(value, str) or not value.strip():
        return f"{name} must be a non-empty string such as the one in the dispatch plan, not {type(value).__name__}"
    if len(value) > MAX_ID_CHARS:
        return f"{name} is {len(value)} characters long; ids are short, copy it from the dispatch plan"
    if not value.isprintable() or not _utf8(value):
        return f"{name} holds control or unencodable characters; copy it verbatim from the dispatch plan"
    return None


def clean_text(text: str) -> str:
    """Free text as storable UTF-8: unencodable characters (lone surrogates) become U+FFFD."""
    return text if _utf8(text) else text.encode("utf-8", errors="replace").decode("utf-8")


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


MAX_PROBLEMS_LISTED = 50
MAX_PROBLEM_CHARS = 1_000


def capped(problems: list[tuple[str, str]], what: str) -> list[tuple[str, str]]:
    """At most ``MAX_PROBLEMS_LISTED`` (location, message) pairs, each of bounded length, so a receipt stays
    small however broken the submission; the last entry says how many more there were."""
    out = [
        (loc[:200], msg if len(msg) <= MAX_PROBLEM_CHARS else msg[:MAX_PROBLEM_CHARS] + "… (cut)")
        for loc, msg in problems[:MAX_PROBLEMS_LISTED]
    ]
    if len(problems) > MAX_PROBLEMS_LISTED:
        out.append(
            (
                "/",
                f"…and {len(problems) - MAX_PROBLEMS_LISTED} more {what} not listed; fix the ones above "
                "(the rest are usually the same mistake) and submit again",
            )
        )
    return out
