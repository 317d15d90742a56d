"""The repository overview a context packet starts from, each part within its share of a budget.

Pure: the manifest's rows, the code map (weighted edges and entry points), the analyzer leads and a way to
read the head of a file in; Markdown sections out. The parts: the tree (directories and files with their kind
and size), the READMEs and design notes, the packaging metadata, the entry points (routes and ``main``
functions the code map found in any language, scripts the packaging declares, files named like one or
carrying a main guard, a server or an argument parser), the code map's hubs, and a summary of the analyzers'
alerts. File text is untrusted and goes into fences.
"""

from __future__ import annotations

import json
import posixpath
import re
import tomllib
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from audit_mcp.core.escape import md_code, md_fence, md_inline, visible
from audit_mcp.store.records import EntryPoint, FileRow, Lead

Reader = Callable[[str, int], bytes | None]  # (repo-relative path, at most this many bytes) -> the head, or None

# A repository this small is read whole by every reviewer anyway: a threat model costs more than it adds.
TINY_FILES = 3
TINY_LINES = 200
MAX_SCANNED = 400  # files whose head is searched for entry-point markers
HEAD_BYTES = 64_000
_SHARES = {"tree": 0.30, "docs": 0.25, "packaging": 0.17, "entry_points": 0.10, "hubs": 0.10, "analyzers": 0.08}

_DOC_NAME = re.compile(r"^(readme|security|architecture|design|threat[-_ ]?model|overview)(\.[a-z]+)?$", re.I)
_PACKAGING = frozenset(
    {
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "Pipfile",
        "requirements.txt",
        "package.json",
        "Cargo.toml",
        "go.mod",
        "pom.xml",
        "build.gradle",
        "build.gradle.kts",
        "Gemfile",
        "composer.json",
        "Dockerfile",
        "docker-compose.yml",
        "docker-compose.yaml",
        "compose.yaml",
        "Procfile",
        "Makefile",
        "tox.ini",
    }
)
_ENTRY_STEMS = frozenset(
    {"main", "app", "server", "cli", "__main__", "wsgi", "asgi", "manage", "run", "daemon", "worker", "index"}
)
_ENTRY_DIRS = frozenset({"bin", "cmd", "scripts", "tools"})
_MARKERS: tuple[tuple[bytes, str], ...] = (
    (b"__name__ == '__main__'", "runs as a script (a main guard)"),
    (b'__name__ == "__main__"', "runs as a script (a main guard)"),
    (b"func main()", "a Go main function"),
    (b"fn main()", "a Rust main function"),
    (b"static void main(", "a Java main method"),
    (b"argparse.ArgumentParser", "parses command-line arguments"),
    (b"@click.command", "a click command"),
    (b"createServer(", "starts a network server"),
    (b".listen(", "listens on a port"),
    (b"make_server(", "starts a network server"),
    (b"serve_forever(", "serves requests"),
    (b"@app.route", "a web route"),
    (b"@router.", "a web route"),
    (b"FastAPI(", "a FastAPI application"),
    (b"Flask(", "a Flask application"),
    (b"app.get(", "a web route"),
    (b"http.HandleFunc(", "a web route"),
)


@dataclass(frozen=True)
class Overview:
    """The sections of a context packet's prompt, as Markdown."""

    tree: str
    docs: str
    packaging: str
    entry_points: str
    hubs: str
    analyzers: str


def tiny(files: Sequence[FileRow]) -> str | None:
    """Why a repository is too small for a context pass (``None`` when it is not)."""
    in_scope = [f for f in files if f.scope == "review"]
    lines = sum(f.line_count for f in in_scope)
    if len(in_scope) <= TINY_FILES or lines <= TINY_LINES:
        return (
            f"the repository is tiny ({len(in_scope)} file(s), {lines} line(s) in scope): every reviewer reads "
            "all of it, so a threat model would cost more than it adds"
        )
    return None


def _clip(text: str, limit: int, more: str) -> str:
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit - len(more) - 1)]
    return cut[: cut.rfind("\n") if "\n" in cut else len(cut)] + "\n" + more


def _tree(files: Sequence[FileRow], limit: int) -> str:
    """Every file with its kind and lines, directories first by depth; past the budget, directories only."""
    rows = sorted(files, key=lambda f: (f.path.count("/"), f.path))
    lines = []
    for f in rows:
        what = f"{f.kind}, {f.line_count} lines" if f.scope == "review" else f"not reviewed: {f.skip_reason or ''}"
        # A name is one line of the listing whatever it holds: a newline, an escape sequence or a
        # right-to-left mark in it is shown as an escape, so no name can forge a line or a heading.
        lines.append(f"{visible(f.path)}  ({visible(what)})")
    listing = "\n".join(lines)
    if len(listing) + 20 <= limit:
        return md_fence(listing)
    dirs: dict[str, list[FileRow]] = defaultdict(list)
    for f in files:
        dirs[posixpath.dirname(f.path) or "."].append(f)
    summary = []
    for d in sorted(dirs, key=lambda d: (d.count("/"), d)):
        members = dirs[d]
        kinds = Counter(m.kind for m in members if m.scope == "review")
        shown = ", ".join(f"{n} {k}" for k, n in kinds.most_common()) or "none reviewed"
        summary.append(f"{visible(d)}/  ({len(members)} files: {shown}; {sum(m.line_count for m in members)} lines)")
    text = _clip("\n".join(summary), limit - 120, f"... {len(dirs)} directories in all; read the rest yourself")
    return "Too many files to list; the directories, with what they hold:\n\n" + md_fence(text)


def _heads(paths: Sequence[str], read: Reader, limit: int, each: int) -> str:
    """The first bytes of each file, fenced, within ``limit`` characters in all."""
    out: list[str] = []
    used = 0
    for path in paths:
        room = min(each, limit - used - 200)
        if room < 400:
            out.append(f"(and {len(paths) - len(out)} more: {', '.join(md_code(p) for p in paths[len(out) :][:8])})")
            break
        data = read(path, room)
        if data is None:
            continue
        text = data.decode("utf-8", errors="replace")
        clipped = len(text) >= room
        block = f"{md_code(path)}{' (its beginning)' if clipped else ''}:\n\n{md_fence(text[:room])}"
        out.append(block)
        used += len(block)
    return "\n\n".join(out) if out else "None found."


def _module_file(module: str, known: set[str]) -> str | None:
    stem = module.split(":", 1)[0].strip().replace(".", "/")
    for candidate in (f"{stem}.py", f"{stem}/__init__.py", f"src/{stem}.py", f"src/{stem}/__init__.py"):
        if candidate in known:
            return candidate
    return None


def _declared(files: Mapping[str, FileRow], read: Reader) -> dict[str, str]:
    """Entry points the packaging metadata declares: file -> how (``console script audit = pkg.cli:main``)."""
    known = set(files)
    out: dict[str, str] = {}
    for path in sorted(p for p in known if posixpath.basename(p) == "pyproject.toml"):
        data = read(path, 400_000)
        try:
            doc = tomllib.loads(data.decode("utf-8")) if data else {}
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            continue
        found = doc.get("project")
        project: dict[str, Any] = found if isinstance(found, dict) else {}
        groups = {"script": project.get("scripts"), "GUI script": project.get("gui-scripts")}
        for label, table in groups.items():
            for name, target in (table or {}).items() if isinstance(table, dict) else ():
                if isinstance(target, str) and (where := _module_file(target, known)):
                    out.setdefault(where, f"declared as {label} `{name}` in {path}")
    for path in sorted(p for p in known if posixpath.basename(p) == "package.json"):
        data = read(path, 400_000)
        try:
            doc = json.loads(data) if data else {}
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        base = posixpath.dirname(path)
        bins = doc.get("bin")
        targets = {"main": doc.get("main")} | (
            {f"bin {k}": v for k, v in bins.items()} if isinstance(bins, dict) else {"bin": bins}
        )
        for label, target in targets.items():
            if isinstance(target, str):
                where = posixpath.normpath(posixpath.join(base, target))
                if where in known:
                    out.setdefault(where, f"declared as `{label}` in {path}")
    for path in sorted(p for p in known if posixpath.basename(p) == "setup.cfg"):
        data = read(path, 200_000) or b""
        for m in re.finditer(rb"^\s*([\w.-]+)\s*=\s*([\w.]+:[\w.]+)\s*$", data, re.M):
            where = _module_file(m.group(2).decode(), known)
            if where:
                out.setdefault(where, f"declared as console script `{m.group(1).decode()}` in {path}")
    return out


def _entry_points(files: Sequence[FileRow], read: Reader, limit: int, mapped: Sequence[EntryPoint] = ()) -> str:
    by_path = {f.path: f for f in files}
    found: dict[str, list[str]] = defaultdict(list)
    for path, how in _declared(by_path, read).items():
        found[path].append(how)
    for entry in mapped:
        found[entry.path].append(f"{entry.how}: {entry.symbol} (line {entry.line})")
    source = [f for f in files if f.scope == "review" and f.kind in ("source", "build")]
    named = [
        f
        for f in source
        if posixpath.splitext(posixpath.basename(f.path))[0] in _ENTRY_STEMS
        or set(f.path.split("/")[:-1]) & _ENTRY_DIRS
    ]
    rest = sorted((f for f in source if f not in named), key=lambda f: (f.path.count("/"), f.path))
    for f in (named + rest)[:MAX_SCANNED]:
        head = read(f.path, HEAD_BYTES) or b""
        hits = list(dict.fromkeys(why for marker, why in _MARKERS if marker in head))
        if hits:
            found[f.path] += hits
        elif f in named:
            found[f.path].append("named like an entry point")
    if not found:
        return "None detected; find them yourself (servers, command-line tools, public APIs, jobs)."
    lines = [f"- {md_code(p)}: {md_inline('; '.join(dict.fromkeys(hows)))}" for p, hows in sorted(found.items())]
    return _clip("\n".join(lines), limit, f"- ... {len(lines)} candidates in all")


def _hubs(edges: Sequence[tuple[str, str] | tuple[str, str, int]], limit: int) -> str:
    """The files most others reach, by how many files reach them (then by the references behind it)."""
    reached_by: dict[str, set[str]] = defaultdict(set)
    weight: Counter[str] = Counter()
    for edge in edges:
        src, dst = edge[0], edge[1]
        reached_by[dst].add(src)
        weight[dst] += edge[2] if len(edge) > 2 else 1
    if not reached_by:
        return "The code map found no edges between files."
    # A hub is used by several files; one file's helper is not.
    shared = [kv for kv in reached_by.items() if len(kv[1]) > 1] or list(reached_by.items())
    ranked = sorted(shared, key=lambda kv: (-len(kv[1]), -weight[kv[0]], kv[0]))[:15]
    lines = [
        f"- {md_code(dst)} is used by {len(srcs)} file(s) ({weight[dst]} reference(s)): "
        + ", ".join(md_code(s) for s in sorted(srcs)[:6])
        + (" ..." if len(srcs) > 6 else "")
        for dst, srcs in ranked
    ]
    return _clip("\n".join(lines), limit, "- ...")


def _analyzers(leads: Sequence[Lead], limit: int) -> str:
    if not leads:
        return "No static-analyzer alerts were imported."
    rules = Counter(f"{x.tool} {x.rule_id}" for x in leads)
    where = Counter(x.path for x in leads)
    lines = [f"{len(leads)} alert(s). By rule:"]
    lines += [f"- {md_inline(rule)}: {n}" for rule, n in rules.most_common(12)]
    lines.append("Most flagged files:")
    lines += [f"- {md_code(path)}: {n}" for path, n in where.most_common(8)]
    return _clip("\n".join(lines), limit, "- ...")


def build_overview(
    files: Sequence[FileRow],
    edges: Sequence[tuple[str, str] | tuple[str, str, int]],
    leads: Sequence[Lead],
    read: Reader,
    *,
    chars: int,
    entries: Sequence[EntryPoint] = (),
) -> Overview:
    """The overview of a repository within ``chars`` characters, split among its parts."""
    share = {k: max(600, int(chars * v)) for k, v in _SHARES.items()}
    docs = sorted(
        (f.path for f in files if _DOC_NAME.match(posixpath.basename(f.path)) and f.path.count("/") <= 1),
        key=lambda p: (p.count("/"), not posixpath.basename(p).lower().startswith("readme"), p),
    )
    packaging = sorted(
        (f.path for f in files if posixpath.basename(f.path) in _PACKAGING and f.path.count("/") <= 1),
        key=lambda p: (p.count("/"), p),
    )
    return Overview(
        tree=_tree(files, share["tree"]),
        docs=_heads(docs[:6], read, share["docs"], 6_000),
        packaging=_heads(packaging[:8], read, share["packaging"], 3_000),
        entry_points=_entry_points(files, read, share["entry_points"], entries),
        hubs=_hubs(edges, share["hubs"]),
        analyzers=_analyzers(leads, share["analyzers"]),
    )
