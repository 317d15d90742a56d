"""The code map's records: a file's facts as intake keeps them, and the resolved map as the store keeps it.

An edge between two files carries its links: one per distinct thing the source names in the target, as
``(how, name, source line, target start, target end, count)``. ``how`` says which rule found it:

- ``import``: an import of the target (``name`` is the spec as written);
- ``call`` / ``use``: the source calls, or otherwise uses (an argument, a type, a decorator), a definition
  of the target reached through an import or the language's own scope (a Go package, a Java package, a
  C function defined once);
- ``name``: a method called on a receiver named after the target's module or class, or a method name defined
  only in the target (``self.apos.permission.can`` → ``permission/index.js``'s ``can``);
- ``link``: a string naming the target (a template, a configuration file, a dotted module path);
- ``route``: a URL route whose handler the target defines.

A target span of ``0, 0`` means the link reaches the file, not one definition in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from audit_mcp.store.records import EntryPoint as Entry
from audit_mcp.store.records import MapEdge

Link = tuple[str, str, int, int, int, int]  # how, name, source line, target start, target end, count
HOWS = ("import", "call", "use", "name", "link", "route")


@dataclass(frozen=True)
class Edge:
    """What one file reaches in another: its links, kept encoded as the store keeps them (a large repository
    has hundreds of thousands; a packet reads a few), and how strongly the two files are tied."""

    src: str
    dst: str
    encoded: str
    weight: int

    @property
    def links(self) -> tuple[Link, ...]:
        return decode_links(self.encoded)

    @classmethod
    def of(cls, src: str, dst: str, links: tuple[Link, ...]) -> Edge:
        """The edge of these links; its weight is one for each distinct thing named, more for what is named
        from several places (at most three per thing)."""
        weight = sum(min(3, max(1, link[5])) for link in links) or 1
        return cls(src, dst, encode_links(links), weight)

    def stored(self) -> MapEdge:
        return MapEdge(self.src, self.dst, self.weight, self.encoded)

    @classmethod
    def from_store(cls, row: MapEdge) -> Edge:
        if not row.links:  # stored before the map: an import
            return cls.of(row.src, row.dst, (("import", "", 0, 0, 0, max(1, row.weight)),))
        return cls(row.src, row.dst, row.links, row.weight)


__all__ = ["HOWS", "CodeMap", "Edge", "Entry", "Link", "clean_name", "decode_links", "encode_links"]


@dataclass(frozen=True)
class CodeMap:
    edges: list[Edge] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    files: int = 0  # how many files were mapped


def encode_links(links: tuple[Link, ...]) -> str:
    """The links as the store keeps them: a line each, fields by tabs (names are cleaned of both)."""
    return "\n".join(
        f"{how}\t{clean_name(name)}\t{line}\t{start}\t{end}\t{count}" for how, name, line, start, end, count in links
    )


def decode_links(text: str | None) -> tuple[Link, ...]:
    """The links of a stored edge; an edge stored before the map carried none reads as one import."""
    if not text:
        return ()
    out: list[Link] = []
    for line in text.split("\n"):
        parts = line.split("\t")
        if len(parts) != 6:
            continue
        how, name, src_line, start, end, count = parts
        try:
            out.append((how, name, int(src_line), int(start), int(end), int(count)))
        except ValueError:
            continue
    return tuple(out)


def clean_name(name: str) -> str:
    """A name as it may be stored and shown: no tabs, newlines or other control characters, at most 160 chars."""
    if len(name) <= 160 and name.isprintable():
        return name
    return "".join(ch if ch.isprintable() else " " for ch in name)[:160]
