"""The code map's facts cache: a new audit parses only the files whose bytes the store has no facts of, and maps
exactly what parsing every file maps; a row that does not unpack is ignored and its file parsed again; the
cache is kept to the running extraction and to what the latest audits use; ``code_map = false`` reads and
writes none of it."""

from __future__ import annotations

import hashlib
import json
import marshal
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.codemap import facts_cache
from audit_mcp.engine.codemap.facts_cache import FactsCache, columns, pack, unpack
from audit_mcp.engine.intake import Manifest, build_manifest
from audit_mcp.store.backends import open_store
from audit_mcp.store.dialect import to_postgres
from audit_mcp.store.identity import RepoIdentity
from audit_mcp.store.records import FileRow
from audit_mcp.usecases.service import AuditService
from tests.conftest import FIXTURES, git
from tests.driving import cli

FIXTURE_NAMES = ("django_shop", "express_api", "go_service", "java_service")
# Small chunks, so that the long files below are chunked and their cuts come from the cache too.
CHUNKED = {"chunk_threshold_lines": 200, "chunk_lines": 100}


def _long_python(functions: int) -> str:
    return "import os\n" + "".join(
        f"\n\ndef handler_{n}(value):\n"
        + "".join(f"    value = value * {k} % 97\n" for k in range(8))
        + "    return value\n"
        for n in range(functions)
    )


def _repo(tmp_path: Path, name: str) -> Path:
    repo = tmp_path / name
    shutil.copytree(FIXTURES / "codemap" / name, repo)
    (repo / "tools").mkdir(exist_ok=True)
    (repo / "tools" / "handlers.py").write_text(_long_python(40))  # 440 lines: chunked
    (repo / "tools" / "copy_of_handlers.py").write_text(_long_python(40))  # the same bytes: one row
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "fixture")
    return repo


def _shape(manifest: Manifest) -> dict[str, Any]:
    """Everything intake found that the map decides: edges with their links and weights, entry points, the
    files with their cuts."""
    code_map = manifest.code_map
    return {
        "edges": [(e.src, e.dst, e.encoded, e.weight) for e in code_map.edges],
        "entries": code_map.entries,
        "mapped": code_map.files,
        "files": [(f.path, f.sha256, f.scope, f.line_count, f.cuts) for f in manifest.files],
    }


# In a fresh interpreter, which has one thread, so that intake may fork its copies (a test run's other
# threads, a connection pool's, would keep it from forking).
_BUILD_THREE_TIMES = """
import json, sys
from pathlib import Path
from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.codemap import facts_cache
from audit_mcp.engine.codemap.facts_cache import FactsCache
from audit_mcp.engine.intake import build_manifest
from tests.test_code_map_facts_cache import CHUNKED, _shape

repo, artifacts = Path(sys.argv[1]), Path(sys.argv[2])
config = SessionConfig(intake_processes=int(sys.argv[3]), **CHUNKED)
parsed = build_manifest(repo, artifacts, config)
cold = FactsCache.load(b"", [])
first = build_manifest(repo, artifacts, config, cache=cold)
zdict, rows = cold.packed(config)
warm = FactsCache.load(zdict, rows)
second = build_manifest(repo, artifacts, config, cache=warm)
print(json.dumps({
    "shapes": [_shape(m) for m in (parsed, first, second)],
    "processes": [m.processes for m in (parsed, first, second)],
    "parseable": sum(1 for f in parsed.in_scope if facts_cache.grammar_key(f.path, f.language) is not None),
    "cold": [cold.hits, len(cold.parsed)], "rows": len(rows), "warm": [warm.hits, len(warm.parsed), warm.ignored],
    "zdict": len(zdict), "dict_packed": sum(packed[:1] == b"\\x01" for _, _, packed in rows),
}, default=list))
"""


@pytest.mark.parametrize("processes", [1, 2], ids=["one-process", "forked-copies"])
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_the_map_built_from_cached_facts_is_the_map_parsed(tmp_path: Path, name: str, processes: int) -> None:
    repo = _repo(tmp_path, name)
    proc = subprocess.run(
        [sys.executable, "-c", _BUILD_THREE_TIMES, str(repo), str(tmp_path / "artifacts"), str(processes)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    parsed, first, second = out["shapes"]
    assert out["processes"] == [processes] * 3
    # Every file mapped but a go.mod (read without parsing) is parsed once, then read from the cache.
    parseable = out["parseable"]
    assert parseable >= parsed["mapped"] - 1
    assert out["cold"] == [0, parseable] and out["warm"] == [parseable, 0, 0]
    assert out["rows"] == parseable - 1  # the two copies of one file are one row
    # Packed with a dictionary sampled from the rows (the two long files alone are more than it holds).
    assert out["zdict"] == facts_cache.ZDICT_BYTES and out["dict_packed"] == out["rows"]
    assert any(path == "tools/handlers.py" and cuts for path, _, _, _, cuts in parsed["files"])
    assert first == parsed
    assert second == parsed


def test_a_file_chunked_otherwise_now_is_parsed_again_for_its_cuts(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "go_service")
    cold = FactsCache.load(b"", [])
    build_manifest(repo, tmp_path / "artifacts", SessionConfig(**CHUNKED), cache=cold)
    smaller = SessionConfig(chunk_threshold_lines=200, chunk_lines=150)
    warm = FactsCache.load(*cold.packed(SessionConfig(**CHUNKED)))
    again = build_manifest(repo, tmp_path / "artifacts", smaller, cache=warm)
    assert sorted(row.path for row, _ in warm.parsed) == ["tools/copy_of_handlers.py", "tools/handlers.py"]
    assert _shape(again) == _shape(build_manifest(repo, tmp_path / "artifacts", smaller))


def _intake(capsys: pytest.CaptureFixture[str], repo: Path, *extra: str) -> str:
    code, out = cli(capsys, "intake", "--root", str(repo), *extra)
    assert code == 0 and out["ran"], out
    detail: str = out["detail"]
    return detail


def _map_words(detail: str) -> str:
    found = re.search(r"code map of .*? entry point\(s\)", detail)
    assert found is not None, detail
    return found[0]


def test_a_new_audit_parses_only_the_files_that_changed_and_ignores_rows_that_do_not_unpack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store_url: str
) -> None:
    repo = _repo(tmp_path, "django_shop")
    first = _intake(capsys, repo)
    mapped = int(re.search(r"code map of (\d+) file", first)[1])  # type: ignore[index]
    assert f"facts of 0 file(s) from the store's cache, {mapped} parsed" in first
    second = _intake(capsys, repo, "--new-audit")
    assert f"facts of {mapped} file(s) from the store's cache, 0 parsed" in second
    assert _map_words(second) == _map_words(first)

    views = repo / "catalogue" / "views.py"
    views.write_text(views.read_text() + "\n# reviewed again\n")
    third = _intake(capsys, repo, "--new-audit")
    assert f"facts of {mapped - 1} file(s) from the store's cache, 1 parsed" in third
    assert _map_words(third) == _map_words(first)

    service = AuditService(repo)
    try:
        with service.store.write() as tx:
            rows = tx.code_facts(facts_cache.version()[0])[1]
            assert len(rows) == mapped  # the old views.py (audit 2's) and the new one; the two copies are one
            wrong_shape = pack(marshal.dumps(("python", "", ((),) * 5)), b"")
            for path, broken in (("catalogue/models.py", b"\x01not zlib at all"), ("catalogue/urls.py", wrong_shape)):
                sha = hashlib.sha256((repo / path).read_bytes()).hexdigest()
                tx.conn.execute("UPDATE code_facts SET facts = ? WHERE sha256 = ?", (broken, sha))
    finally:
        service.store.close()
    fourth = _intake(capsys, repo, "--new-audit")
    assert f"facts of {mapped - 2} file(s) from the store's cache, 2 parsed (2 cached row(s) unreadable" in fourth
    assert _map_words(fourth) == _map_words(first)
    fifth = _intake(capsys, repo, "--new-audit")
    assert f"facts of {mapped} file(s) from the store's cache, 0 parsed" in fifth


def test_with_the_code_map_off_nothing_is_parsed_read_or_cached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path, "go_service")
    config = tmp_path / "off.toml"
    config.write_text("code_map = false\n")
    detail = _intake(capsys, repo, "--config", str(config))
    assert "code map of 0 file(s)" in detail and "cache" not in detail
    service = AuditService(repo)
    try:
        with service.store.read() as tx:
            assert tx.code_facts(facts_cache.version()[0]) == (b"", [])
    finally:
        service.store.close()
    cache = FactsCache.load(b"", [])
    build_manifest(repo, tmp_path / "artifacts", SessionConfig(code_map=False), cache=cache)
    assert cache.parsed == [] and cache.hits == 0


_DEFS = [("f", "function", 1, 2, ""), ("m", "method", 3, 4, "C")]
_REST = ([("os", "", "", 1)], [("os.path.join", "call", 2, 3)], [("a.html", 5, "render")])


def _row(*fields: Any, defs: Any = None, rest: Any = _REST, span: Any = None, cuts: Any = None) -> bytes:
    """A row as ``pack`` writes it, of these facts (or of ``fields`` as they are)."""
    if not fields:
        columns = tuple(zip(*_DEFS, strict=True)) if defs is None else defs
        fields = ("python", "", columns, rest if isinstance(rest, bytes) else marshal.dumps(rest), span, cuts)
    return pack(marshal.dumps(fields), b"")


def test_a_good_row_passes_the_checks_the_broken_ones_fail() -> None:
    found = unpack(_row(span=100, cuts="1,40"), b"", "python")
    assert found is not None and found[0][2] == _DEFS and found[1] == (100, "1,40")


@pytest.mark.parametrize(
    "packed",
    [
        b"",
        b"\x02" + zlib.compress(b"x"),  # an unknown format
        b"\x01" + zlib.compress(b"x"),  # packed with a dictionary the store does not have
        b"\x00" + zlib.compress(marshal.dumps(("python",)))[:-3],  # cut short
        b"\x00" + zlib.compress(marshal.dumps(("python",))) + b"tail",
        b"\x00" + zlib.compress(b"not marshal data"),
        b"\x00" + zlib.compress(b"\0" * (80 << 20)),  # inflates past any file's facts
        _row(*[1, 2, 3]),
        _row("python", "", tuple(zip(*_DEFS, strict=True)), marshal.dumps(_REST), None),  # a field short
        _row("javascript", "", tuple(zip(*_DEFS, strict=True)), marshal.dumps(_REST), None, None),  # another grammar
        _row(defs=tuple(zip(*_DEFS, strict=True))[:4]),  # four columns of definitions
        _row(defs=(("f",), ("function",), (1,), (2,), ())),  # columns of different lengths
        _row(defs=(("f",), ("function",), (True,), (2,), ("",))),  # a bool where a line is
        _row(defs=(("f",), ("lambda",), (1,), (2,), ("",))),  # an unknown kind of definition
        _row(defs=[("f",), ("function",), (1,), (2,), ("",)]),  # a list where the columns' tuple is
        _row(rest=b"not marshal data"),
        _row(rest=_REST[:2]),  # two groups of three
        _row(rest=([("os", "", 1)], [], [])),  # an import of three fields
        _row(rest=([["os", "", "", 1]], [], [])),  # an import that is a list
        _row(rest=([], [("g", "jump", 1, 1)], [])),  # a reference neither a call nor a use
        _row(rest=([], [], [("a.html", "5", "render")])),  # a line that is text
        _row(rest=([], [], ("a.html", 5, "render"))),  # strings that are one string's fields
        _row(span=0),
        _row(span=100, cuts="1,x"),
        _row(cuts="1"),  # cuts without the chunk size they were found for
    ],
)
def test_a_row_that_is_not_exactly_what_pack_writes_is_ignored(packed: bytes) -> None:
    assert unpack(packed, b"", "python") is None
    cache = FactsCache.load(b"", [("0" * 64, "python", packed)])
    assert cache.ignored == 1 and cache.known == {} and cache.facts == {}


def test_a_packed_row_unpacks_to_the_facts_and_cuts_it_was_packed_from() -> None:
    facts = (
        "python",
        "pkg",
        _DEFS,
        marshal.dumps(_REST),
    )
    zdict = b"function method call" * 300
    for dictionary in (b"", zdict):
        found = unpack(pack(marshal.dumps(columns(facts, (100, "1,40"))), dictionary), dictionary, "python")
        assert found is not None
        (grammar, package, defs, rest), cut = found
        assert (grammar, package, defs, cut) == ("python", "pkg", facts[2], (100, "1,40"))
        assert marshal.loads(rest) == marshal.loads(facts[3])


def test_the_version_names_what_made_the_facts_and_changes_with_the_extractor(monkeypatch: pytest.MonkeyPatch) -> None:
    key, label = facts_cache.version()
    assert re.fullmatch(r"[0-9a-f]{16}", key)
    assert re.search(r"tree-sitter \d", label) and re.search(r"tree-sitter-language-pack \d", label)
    assert f"facts {facts_cache.EXTRACTOR_VERSION};" in label
    monkeypatch.setattr(facts_cache, "EXTRACTOR_VERSION", facts_cache.EXTRACTOR_VERSION + 1)
    facts_cache.version.cache_clear()
    try:
        assert facts_cache.version()[0] != key
    finally:
        monkeypatch.undo()
        facts_cache.version.cache_clear()
    assert facts_cache.version()[0] == key


def test_the_packed_facts_are_bytes_on_postgresql_too() -> None:
    ddl = to_postgres("CREATE TABLE code_facts (facts BLOB NOT NULL, blob_name TEXT)", parameters=False)
    assert ddl == 'CREATE TABLE code_facts (facts BYTEA NOT NULL, blob_name TEXT COLLATE "C")'


def test_the_cache_keeps_the_running_version_and_the_bytes_of_the_latest_audits(tmp_path: Path, store_url: str) -> None:
    store = open_store(
        None if store_url == "sqlite" else store_url, tmp_path / "artifacts", lambda: RepoIdentity("name:t", "t")
    )
    try:
        with store.write() as tx:
            for hashes in (["h1", "h2"], ["h2", "h3"], ["h3", "h4"]):
                audit = tx.create_audit(
                    now="2026-01-01T00:00:00Z", root="/r", git_head=None, git_dirty=False, digest="d", lenses=[]
                )
                tx.insert_files(audit, [FileRow(f"{h}.py", "python", 1, 1, h, "review", None) for h in hashes])
            assert tx.record_code_facts("v0", "version zero", b"a dictionary", [("h3", "python", b"old")])
            assert not tx.record_code_facts("v0", "version zero", b"another", [("h4", "python", b"old")])
            # Another version's first write makes the cache its own: the rows of the one before go.
            rows = [(h, "python", b"\x00" + h.encode()) for h in ("h1", "h2", "h3", "h4", "h5")]
            assert tx.record_code_facts("v1", "version one", b"", rows)
            assert tx.code_facts("v0") == (b"", [])
            # Recorded again: the rows of the same bytes are replaced, not doubled; a dictionary is kept once
            # there is one.
            assert tx.record_code_facts("v1", "version one", b"", [("h2", "python", b"\x00new")])
            assert tx.record_code_facts("v1", "version one", b"zd", [])
            assert tx.prune_code_facts("v1", 2) == 2  # h1 (audit 1's only) and h5 (no audit's)
        with store.read() as tx:
            zdict, kept = tx.code_facts("v1")
            assert zdict == b"zd" and sorted((sha, grammar, bytes(facts)) for sha, grammar, facts in kept) == [
                ("h2", "python", b"\x00new"),
                ("h3", "python", b"\x00h3"),
                ("h4", "python", b"\x00h4"),
            ]
        with store.write() as tx:
            assert tx.prune_code_facts("v2", 2) == 3  # a cache of another version: every row goes
            assert tx.code_facts("v1") == (b"", []) and tx.prune_code_facts("v2", 2) == 0
    finally:
        store.close()
