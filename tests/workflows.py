"""The shell steps of the GitHub Actions workflows the docs ship, read as a runner would read them (the
subset of YAML they use), so that tests can run them in order."""

from __future__ import annotations

from pathlib import Path


def workflow_steps(path: Path) -> list[tuple[str, dict[str, str], str]]:
    """A workflow's shell steps in order: (name, env, script); steps that use an action are left out."""
    lines = path.read_text().splitlines()
    steps: list[tuple[str, dict[str, str], str]] = []
    current: dict[str, object] = {"env": {}}
    i = 0
    while i < len(lines):
        text = lines[i].strip()
        if text.startswith("- "):
            if current.get("run"):
                steps.append((str(current.get("name", "")), dict(current["env"]), str(current["run"])))  # type: ignore[call-overload]
            current = {"env": {}}
            text = text[2:]
        key, _, value = text.partition(":")
        if key == "name":
            current["name"] = value.strip()
        elif key == "env":
            indent = len(lines[i]) - len(lines[i].lstrip())
            while i + 1 < len(lines) and len(lines[i + 1]) - len(lines[i + 1].lstrip()) > indent:
                i += 1
                k, _, v = lines[i].strip().partition(":")
                current["env"][k] = v.strip()  # type: ignore[index]
        elif key == "run":
            if value.strip() == "|":
                indent = len(lines[i]) - len(lines[i].lstrip())
                body = []
                while i + 1 < len(lines) and len(lines[i + 1]) - len(lines[i + 1].lstrip()) > indent:
                    i += 1
                    body.append(lines[i].strip())
                current["run"] = "\n".join(body)
            else:
                current["run"] = value.strip()
        i += 1
    if current.get("run"):
        steps.append((str(current.get("name", "")), dict(current["env"]), str(current["run"])))  # type: ignore[call-overload]
    return steps
