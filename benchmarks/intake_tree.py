"""Intake on a real source tree: the manifest of every file under a directory (read, classified, hashed,
scanned for imports), this checkout against another in the same run.

    python benchmarks/intake_tree.py TREE [--baseline CHECKOUT] [--rounds 3]

The generated repository of ``scale.py`` has small files only; a real tree (a Python installation's
``lib/python3.X``, a vendored monorepo) has large ones, where costs that grow with a file's size, not
its count, show. Each round runs each checkout in a fresh interpreter; prints one JSON document with the
best CPU and wall seconds of each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

_INTAKE = """
import json, sys, time
from pathlib import Path
from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.intake import build_manifest
root, artifacts = Path(sys.argv[1]), Path(sys.argv[2])
c, w = time.process_time(), time.perf_counter()
manifest = build_manifest(root, artifacts, SessionConfig())
print(json.dumps({"cpu_seconds": time.process_time() - c, "seconds": time.perf_counter() - w,
                  "files": len(manifest.files), "in_scope": len(manifest.in_scope),
                  "bytes_in_scope": sum(f.size for f in manifest.in_scope), "digest": manifest.digest}))
"""


def _run(checkout: Path, tree: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as artifacts:
        proc = subprocess.run(
            [sys.executable, "-c", _INTAKE, str(tree), artifacts],
            capture_output=True,
            text=True,
            check=False,
            cwd=checkout,
            env={**os.environ, "PYTHONPATH": str(checkout)},
        )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path, help="a directory of source code (read only; nothing is written there)")
    parser.add_argument("--baseline", type=Path, help="another checkout to run side by side")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    tree = args.tree.resolve()
    checkouts = {"this": HERE.parent, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in checkouts}
    for _ in range(args.rounds):  # interleaved, so load affects both alike
        for name, checkout in checkouts.items():
            runs[name].append(_run(checkout, tree))
    out: dict[str, Any] = {"tree": str(tree), "load_average": os.getloadavg()[0]}
    for name, rounds in runs.items():
        out[name] = {
            "cpu_seconds": round(min(r["cpu_seconds"] for r in rounds), 3),
            "seconds": round(min(r["seconds"] for r in rounds), 3),
            **{k: rounds[0][k] for k in ("files", "in_scope", "bytes_in_scope", "digest")},
        }
    if args.baseline:
        out["same_manifest"] = out["this"]["digest"] == out["baseline"]["digest"]
        out["cpu_ratio"] = round(out["baseline"]["cpu_seconds"] / out["this"]["cpu_seconds"], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
