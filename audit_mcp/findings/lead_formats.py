"""Analyzer output read as leads: SARIF 2.1.0 from any producer, and the plain JSON of bandit and semgrep.

The format is told from the document itself, never from the file name: SARIF has a top-level ``runs``
array; ``bandit -f json`` writes ``results`` whose items carry ``filename``, ``line_number`` and
``test_id`` (with ``generated_at`` and ``metrics`` beside them); ``semgrep --json`` writes ``results``
whose items carry ``check_id``, ``path`` and ``start`` (with ``paths`` and ``errors`` beside them).
Anything else is refused, saying what it looked like and what is read. Paths are mapped to the
repository as SARIF's are: alerts outside the root or out of scope are dropped and counted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

from audit_mcp.core.errors import PathError
from audit_mcp.core.fs import normalize_relpath
from audit_mcp.store.records import Lead

MAX_MESSAGE_CHARS = 300
_CWE_TAG = re.compile(r"cwe[-/_ ]?(\d{1,5})", re.I)
_UNSAFE = re.compile(r"[\x00-\x1f|`]+")
_BANDIT_LEVELS = {"HIGH": "error", "MEDIUM": "warning", "LOW": "note"}
_SEMGREP_LEVELS = {
    "CRITICAL": "error",
    "HIGH": "error",
    "ERROR": "error",
    "MEDIUM": "warning",
    "WARNING": "warning",
    "LOW": "note",
    "INFO": "note",
}
InScope = Callable[[str], bool]


def detect(doc: Any) -> str | None:
    """``sarif``, ``bandit`` or ``semgrep`` for a document in one of those formats; None otherwise."""
    if not isinstance(doc, Mapping):
        return None
    if isinstance(doc.get("runs"), list):
        return "sarif"
    results = doc.get("results")
    if not isinstance(results, list):
        return None
    items = [r for r in results if isinstance(r, Mapping)]
    if len(items) != len(results):
        return None
    if items:
        if all({"filename", "line_number", "test_id"} <= r.keys() for r in items):
            return "bandit"
        if all({"check_id", "path"} <= r.keys() and ("start" in r or "line" in r) for r in items):
            return "semgrep"
        return None
    if {"generated_at", "metrics"} <= doc.keys():
        return "bandit"
    if "paths" in doc and "errors" in doc:
        return "semgrep"
    return None


def refusal(doc: Any, source: str) -> str:
    """Why ``source`` is not read, and what would be."""
    if isinstance(doc, Mapping):
        keys = ", ".join(sorted(str(k) for k in doc)[:8]) or "no keys"
        seen = f"a JSON object with {keys}"
        if isinstance(doc.get("results"), list):
            seen += (
                " whose results are neither bandit's (filename, line_number, test_id) nor semgrep's "
                "(check_id, path, start)"
            )
    else:
        seen = f"a JSON {type(doc).__name__.replace('list', 'array').replace('dict', 'object')}"
    return (
        f"analyzer results {source} are not in a format audit-mcp reads (it is {seen}). Give SARIF 2.1.0 from "
        "any analyzer (a top-level 'runs' array), bandit's JSON (`bandit -r . -f json -o FILE`) or semgrep's "
        "JSON (`semgrep --json -o FILE`), then call next_step again"
    )


def clean(text: str, cap: int = MAX_MESSAGE_CHARS) -> str:
    """Analyzer text can quote the untrusted code: one line, no table or code-fence breakers, capped."""
    flat = _UNSAFE.sub(" ", text).strip()
    return flat if len(flat) <= cap else flat[: cap - 1] + "…"


def relpath(uri: str, base_uri: str | None, root: Path) -> str | None:
    """A repo-relative path for an alert's file (a URI or a plain path), or None when it points outside the root."""
    parsed = urlparse(uri)
    if parsed.scheme == "file" or (parsed.scheme == "" and uri.startswith("/")):
        absolute = Path(unquote(parsed.path)).resolve()
    elif parsed.scheme:
        return None
    elif base_uri is not None and urlparse(base_uri).scheme == "file":
        absolute = (Path(unquote(urlparse(base_uri).path)) / unquote(uri)).resolve()
    else:
        try:
            return normalize_relpath(unquote(uri))
        except PathError:
            return None
    try:
        return PurePosixPath(absolute.relative_to(root.resolve()).as_posix()).as_posix()
    except ValueError:
        return None


def cwe_numbers(tags: Iterable[object]) -> tuple[str, ...]:
    """The CWE numbers named in tags such as ``external/cwe/cwe-089`` or ``CWE-79: Cross-site scripting``."""
    return tuple(
        dict.fromkeys(m.group(1).lstrip("0") for t in tags if isinstance(t, str) for m in [_CWE_TAG.search(t)] if m)
    )


def parse_plain(doc: Mapping[str, Any], kind: str, root: Path, in_scope: InScope) -> tuple[list[Lead], dict[str, int]]:
    """Leads (without ids yet) from a bandit or semgrep JSON document, and the alerts dropped, by reason."""
    return _parse_items(doc["results"], root, in_scope, _bandit if kind == "bandit" else _semgrep)


# One alert of a plain-JSON format: (path, start, end, rule, level, message, cwes, help) or None.
_Alert = tuple[str, int, int, str, str, str, tuple[str, ...], str | None]


def _parse_items(
    items: list[Mapping[str, Any]], root: Path, in_scope: InScope, read: Callable[[Mapping[str, Any]], _Alert | None]
) -> tuple[list[Lead], dict[str, int]]:
    tool = "Bandit" if read is _bandit else "Semgrep"  # the names their SARIF gives, so both forms deduplicate
    leads: list[Lead] = []
    dropped: dict[str, int] = {}
    for item in items:
        alert = read(item)
        if alert is None:
            dropped["no location"] = dropped.get("no location", 0) + 1
            continue
        raw, start, end, rule_id, level, message, cwes, help_uri = alert
        path = relpath(raw, None, root)
        if path is None:
            dropped["outside the repository"] = dropped.get("outside the repository", 0) + 1
            continue
        if not in_scope(path):
            dropped["file not in scope"] = dropped.get("file not in scope", 0) + 1
            continue
        leads.append(
            Lead(
                lead_id="",
                tool=tool,
                rule_id=clean(rule_id, 100),
                path=path,
                start_line=max(1, start),
                end_line=max(start, end, 1),
                level=level,
                message=clean(message or rule_id),
                cwes=cwes,
                help_uri=help_uri,
            )
        )
    return leads, dropped


def _line(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10**9 else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _uri(value: Any) -> str | None:
    return value if isinstance(value, str) and value.startswith(("https://", "http://")) and len(value) < 500 else None


def _bandit(item: Mapping[str, Any]) -> _Alert | None:
    path, start = item.get("filename"), _line(item.get("line_number"))
    if not isinstance(path, str) or not path or start is None:
        return None
    lines = [n for n in (_line(v) for v in item.get("line_range") or []) if n is not None]
    end = max([start, *lines])
    rule = str(item.get("test_id") or "unknown")
    level = _BANDIT_LEVELS.get(str(item.get("issue_severity", "")).upper(), "warning")
    cwe = item.get("issue_cwe")
    cwes = cwe_numbers([f"CWE-{cwe.get('id')}"]) if isinstance(cwe, Mapping) else ()
    return path, start, end, rule, level, str(item.get("issue_text") or ""), cwes, _uri(item.get("more_info"))


def _semgrep(item: Mapping[str, Any]) -> _Alert | None:
    path = item.get("path")
    begin, finish = item.get("start"), item.get("end")
    start = _line(begin.get("line")) if isinstance(begin, Mapping) else _line(item.get("line"))
    if not isinstance(path, str) or not path or start is None:
        return None
    end = (_line(finish.get("line")) if isinstance(finish, Mapping) else _line(item.get("end_line"))) or start
    extra = _mapping(item.get("extra"))
    metadata = _mapping(extra.get("metadata"))
    severity = extra.get("severity") or item.get("severity") or ""
    level = _SEMGREP_LEVELS.get(str(severity).upper(), "warning")
    raw_cwe = metadata.get("cwe")
    tags = [raw_cwe] if isinstance(raw_cwe, str) else [t for t in raw_cwe or [] if isinstance(t, str)]
    references = metadata.get("references")
    first_ref = references[0] if isinstance(references, list) and references else None
    help_uri = _uri(metadata.get("source")) or _uri(first_ref)
    message = extra.get("message") or item.get("message") or ""
    return path, start, end, str(item.get("check_id")), level, str(message), cwe_numbers(tags), help_uri
