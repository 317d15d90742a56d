"""Building a code map from files given as text, as intake builds it, and reading it back."""

from __future__ import annotations

from collections.abc import Mapping

from audit_mcp.engine.codemap.extract import Def, map_file, unpack
from audit_mcp.engine.codemap.model import CodeMap, Link
from audit_mcp.engine.codemap.resolve import build
from audit_mcp.engine.languages import detect_language


def map_of(files: Mapping[str, str]) -> CodeMap:
    """The map of a repository made of ``files`` (path -> text), every file in scope."""
    facts = {}
    for path, text in files.items():
        found, _ = map_file(path, detect_language(path), text.encode())
        if found is not None:
            facts[path] = found
    return build(facts, set(files))


def defs_of(path: str, text: str) -> list[Def]:
    found, _ = map_file(path, detect_language(path), text.encode())
    assert found is not None, f"{path} is not mapped"
    return found[2]


def imports_of(path: str, text: str) -> list[tuple[str, str, str, int]]:
    found, _ = map_file(path, detect_language(path), text.encode())
    assert found is not None
    return unpack(found[3])[0]


def edges(code_map: CodeMap) -> set[tuple[str, str]]:
    return {(e.src, e.dst) for e in code_map.edges}


def links(code_map: CodeMap, src: str, dst: str) -> list[Link]:
    """The links of the edge ``src`` -> ``dst`` (an assertion error when there is none)."""
    found = [e for e in code_map.edges if (e.src, e.dst) == (src, dst)]
    assert found, f"no edge {src} -> {dst}; edges: {sorted(edges(code_map))}"
    return list(found[0].links)


def named(code_map: CodeMap, src: str, dst: str) -> set[tuple[str, str]]:
    """``(how, name)`` of every link from ``src`` to ``dst``."""
    return {(link[0], link[1]) for link in links(code_map, src, dst)}
