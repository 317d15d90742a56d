"""Which lenses can apply to which kind of file, so that every cell is one a reviewer can answer.

The default map: the audit's lenses that read a file's kind apply to it (``lenses`` in the config, in
its order); a ``lens_rules`` entry that matches the path overrides the map for that path, whatever its
kind. A file no lens of the audit can read is skipped at intake, with the reason and the fix.
"""

from __future__ import annotations

from collections.abc import Sequence

from audit_mcp.core.config import SessionConfig
from audit_mcp.engine.file_kinds import FileKind
from audit_mcp.engine.globs import compile_globs

_ALL = frozenset(FileKind)
# What each lens reads. Concurrency and performance need running code; the security lens says itself
# that test files are out of its scope; docs can only be wrong (correctness); data and assets are read
# by no lens unless a rule says so.
LENS_KINDS: dict[str, frozenset[FileKind]] = {
    "security": frozenset({FileKind.SOURCE, FileKind.BUILD, FileKind.CONFIG, FileKind.MARKUP}),
    "correctness": frozenset(
        {FileKind.SOURCE, FileKind.TEST, FileKind.BUILD, FileKind.CONFIG, FileKind.MARKUP, FileKind.DOCS}
    ),
    "error_handling": frozenset({FileKind.SOURCE, FileKind.BUILD}),
    "concurrency": frozenset({FileKind.SOURCE}),
    "performance": frozenset({FileKind.SOURCE}),
    "maintainability": frozenset({FileKind.SOURCE, FileKind.TEST, FileKind.BUILD, FileKind.MARKUP}),
    "tests": frozenset({FileKind.SOURCE, FileKind.TEST}),
}
# A lens without an entry (a new file under prompts/lenses/) reads code: source and tests.
_DEFAULT_KINDS = frozenset({FileKind.SOURCE, FileKind.TEST})


def kinds_of(lens: str) -> frozenset[FileKind]:
    return LENS_KINDS.get(lens, _DEFAULT_KINDS)


def lenses_reading(kind: FileKind, lenses: Sequence[str]) -> list[str]:
    """The lenses of ``lenses`` that read files of ``kind``, in their order."""
    return [lens for lens in lenses if kind in kinds_of(lens)]


class LensSelector:
    """Which lenses apply to a file: the last matching ``lens_rules`` entry, else the audit's lenses that
    read its kind."""

    def __init__(self, config: SessionConfig) -> None:
        self._default = list(config.lenses)
        self._rules = [
            (compile_globs([r.glob], source=f"[[lens_rules]] entry {i + 1} (glob)"), list(r.lenses))
            for i, r in enumerate(config.lens_rules)
        ]
        self._by_kind = {kind: lenses_reading(kind, self._default) for kind in FileKind}

    def rule_for(self, path: str) -> list[str] | None:
        """The lenses of the last ``lens_rules`` entry matching ``path``, if any."""
        chosen = None
        for spec, lenses in self._rules:
            if spec.match(path):
                chosen = lenses
        return chosen

    def for_path(self, path: str, kind: FileKind) -> Sequence[str]:
        rule = self.rule_for(path)
        return rule if rule is not None else self._by_kind[kind]

    def why_none(self, kind: FileKind) -> str:
        """Why a file of ``kind`` gets no lens, and how to review it anyway (the skip reason)."""
        readers = sorted(lens for lens, kinds in LENS_KINDS.items() if kind in kinds)
        article = "an" if kind.value[0] in "aeiou" else "a"
        if not readers:
            return (
                f"{kind.value} file: no lens reads {kind.value} or asset files (add a [[lens_rules]] entry "
                "in the config to review it)"
            )
        return (
            f"{article} {kind.value} file, and none of this audit's lenses ({', '.join(self._default) or 'none'}) "
            f"reads {kind.value} files; {', '.join(readers)} would (add one to `lenses`, or a [[lens_rules]] entry)"
        )
