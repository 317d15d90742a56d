"""Running the static analyzers the config names, when they are installed, for their SARIF output.

Optional by design: an analyzer that is missing, fails or times out is noted
and skipped, never a reason to stop the audit. The analyzers only read the
code (none of them runs it); their output goes to the artifacts directory.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit_mcp.core.fs import inside

TIMEOUT_SECONDS = 300

# name -> (argument list after the executable, given the output path; exit codes that mean "ran").
COMMANDS: dict[str, tuple[Callable[[Path], list[str]], frozenset[int]]] = {
    "bandit": (lambda out: ["-r", ".", "-f", "sarif", "-o", str(out), "-q"], frozenset({0, 1})),
    "ruff": (
        lambda out: ["check", ".", "--output-format", "sarif", "--exit-zero", "--no-cache", "--output-file", str(out)],
        frozenset({0}),
    ),
}

Which = Callable[[str], str | None]
Runner = Callable[..., Any]


@dataclass(frozen=True)
class AnalyzerRun:
    name: str
    sarif: Path | None
    note: str


def find_executable(name: str) -> str | None:
    """On PATH, or beside this Python (a virtual environment's scripts directory)."""
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.is_file() else None


def run_analyzers(
    names: Sequence[str],
    root: Path,
    out_dir: Path,
    *,
    which: Which = find_executable,
    runner: Runner = subprocess.run,
) -> list[AnalyzerRun]:
    """Run each named analyzer over ``root``; one ``AnalyzerRun`` per name, with its SARIF or why not."""
    runs = []
    for name in names:
        exe = which(name)
        if exe is None:
            runs.append(AnalyzerRun(name, None, f"{name} is not installed; skipped"))
            continue
        if inside(root, Path(exe)):
            # The code under audit is untrusted: never run a program it ships (e.g. "." on PATH).
            runs.append(AnalyzerRun(name, None, f"{name} resolves to {exe}, inside the audited repository; refused"))
            continue
        args, ok_codes = COMMANDS[name]
        out = out_dir / f"{name}.sarif"
        out_dir.mkdir(parents=True, exist_ok=True)
        out.unlink(missing_ok=True)
        try:
            done = runner(
                [exe, *args(out)], cwd=root, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False
            )
        except subprocess.TimeoutExpired:
            runs.append(AnalyzerRun(name, None, f"{name} ran over {TIMEOUT_SECONDS}s; skipped"))
            continue
        except OSError as exc:
            runs.append(AnalyzerRun(name, None, f"{name} could not start ({exc.strerror}); skipped"))
            continue
        if done.returncode not in ok_codes or not out.is_file():
            tail = (done.stderr or "").strip().splitlines()[-1:] or ["no output"]
            runs.append(
                AnalyzerRun(name, None, f"{name} failed with exit code {done.returncode} ({tail[0][:200]}); skipped")
            )
            continue
        runs.append(AnalyzerRun(name, out, f"{name} ran"))
    return runs
