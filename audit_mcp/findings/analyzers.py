"""Running the static analyzers the config names, when they are installed, for their SARIF output.

Optional by design: an analyzer that is missing, fails or times out is noted
and skipped, never a reason to stop the audit. The analyzers only read the
code (none of them runs it); their output goes to the artifacts directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit_mcp.core.executable import find_program
from audit_mcp.core.fs import inside, write_atomic

TIMEOUT_SECONDS = 300

# name -> (argument list after the executable, given the output path; exit codes that mean "ran"). The files
# to read follow: the manifest's Python files, never a walk of the tree (a walk follows what intake refused:
# links out of the root, ignored folders).
COMMANDS: dict[str, tuple[Callable[[Path], list[str]], frozenset[int]]] = {
    "bandit": (lambda out: ["-f", "sarif", "-o", str(out), "-q", "--"], frozenset({0, 1})),
    "ruff": (
        lambda out: ["check", "--output-format", "sarif", "--exit-zero", "--no-cache", "--output-file", str(out), "--"],
        frozenset({0}),
    ),
}
PYTHON_SUFFIXES = (".py", ".pyi")
MAX_ARGUMENT_CHARS = 200_000  # file names on one command line; more go in further runs, their SARIF runs joined

Which = Callable[[str], str | None]
Runner = Callable[..., Any]


@dataclass(frozen=True)
class AnalyzerRun:
    name: str
    sarif: Path | None
    note: str


def find_executable(name: str) -> str | None:
    """On the trusted PATH (no empty or relative entry), or beside this Python (a virtual environment's scripts
    directory)."""
    found = find_program(name)
    if found:
        return found
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.is_file() else None


def run_analyzers(
    names: Sequence[str],
    root: Path,
    out_dir: Path,
    files: Sequence[str],
    *,
    which: Which = find_executable,
    runner: Runner = subprocess.run,
) -> list[AnalyzerRun]:
    """Run each named analyzer over the Python files among ``files`` (repo-relative, the manifest's files in
    scope); one ``AnalyzerRun`` per name, with its SARIF or why not."""
    targets = [f for f in files if f.endswith(PYTHON_SUFFIXES)]
    runs = []
    for name in names:
        if not targets:
            runs.append(AnalyzerRun(name, None, f"{name}: no Python file in scope; not run"))
            continue
        exe = which(name)
        if exe is None:
            runs.append(AnalyzerRun(name, None, f"{name} is not installed; skipped"))
            continue
        if inside(root, Path(exe)):
            # The code under audit is untrusted: never run a program it ships (e.g. "." on PATH).
            runs.append(AnalyzerRun(name, None, f"{name} resolves to {exe}, inside the audited repository; refused"))
            continue
        out_dir.mkdir(parents=True, exist_ok=True)
        runs.append(_run(name, exe, root, out_dir, targets, runner))
    return runs


def _batches(files: Sequence[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    size = 0
    for name in files:
        if out[-1] and size + len(name) + 1 > MAX_ARGUMENT_CHARS:
            out.append([])
            size = 0
        out[-1].append(name)
        size += len(name) + 1
    return out


def _run(name: str, exe: str, root: Path, out_dir: Path, targets: Sequence[str], runner: Runner) -> AnalyzerRun:
    """One analyzer over ``targets``, in as many runs as their names need; their SARIF runs in one file."""
    args, ok_codes = COMMANDS[name]
    out = out_dir / f"{name}.sarif"
    out.unlink(missing_ok=True)
    batches = _batches(targets)
    documents: list[dict[str, Any]] = []
    for i, batch in enumerate(batches):
        part = out if len(batches) == 1 else out_dir / f"{name}.part{i + 1}.sarif"
        part.unlink(missing_ok=True)
        try:
            done = runner(
                [exe, *args(part), *batch],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return AnalyzerRun(name, None, f"{name} ran over {TIMEOUT_SECONDS}s; skipped")
        except OSError as exc:
            return AnalyzerRun(name, None, f"{name} could not start ({exc.strerror}); skipped")
        if done.returncode not in ok_codes or not part.is_file():
            tail = (done.stderr or "").strip().splitlines()[-1:] or ["no output"]
            return AnalyzerRun(name, None, f"{name} failed with exit code {done.returncode} ({tail[0][:200]}); skipped")
        if len(batches) > 1:
            try:
                documents.append(json.loads(part.read_text(encoding="utf-8")))
            except (OSError, ValueError) as exc:
                return AnalyzerRun(name, None, f"{name} wrote SARIF that cannot be read ({exc}); skipped")
            part.unlink()
    if documents:
        joined = {**documents[0], "runs": [run for doc in documents for run in doc.get("runs", [])]}
        write_atomic(out, json.dumps(joined))
    return AnalyzerRun(name, out, f"{name} ran" + (f" in {len(batches)} parts" if len(batches) > 1 else ""))
