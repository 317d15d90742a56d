"""A query for a language without one of its own, made from the node kinds its grammar declares.

Most tree-sitter grammars name their nodes alike: ``function_definition``, ``class_declaration``,
``method_declaration``, ``call_expression``, with a ``name`` or ``function`` field. The patterns below are
proposed for every such kind of a grammar; ``grammars`` keeps those the grammar accepts. What they find is
definitions with their spans (so chunks end at them) and calls by name (resolved only where the name is
defined once); imports are not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from tree_sitter import Language

_DEFINITION = re.compile(
    r"^(?:\w+_)?(function|method|class|struct|interface|trait|enum|module|object|protocol|record|contract|"
    r"subroutine|procedure|macro)_(definition|declaration|item|specifier|def|statement)$"
)
_CLASS_WORDS = frozenset(
    {"class", "struct", "interface", "trait", "enum", "module", "object", "protocol", "record", "contract"}
)
_CALL = re.compile(
    r"^(call|call_expression|function_call|function_call_expression|method_call|method_invocation|"
    r"invocation_expression|method_call_expression)$"
)


def _named_kinds(language: Language) -> Iterator[str]:
    seen: set[str] = set()
    for kind_id in range(language.node_kind_count):
        kind = language.node_kind_for_id(kind_id)
        named = language.node_kind_is_named(kind_id) and language.node_kind_is_visible(kind_id)
        if kind and named and kind not in seen:
            seen.add(kind)
            yield kind


def patterns(language: Language) -> list[str]:
    """Patterns for the definition and call kinds of ``language``, each to be tried alone."""
    out: list[str] = []
    for kind in _named_kinds(language):
        if (match := _DEFINITION.match(kind)) is not None:
            capture = "def.class" if match[1] in _CLASS_WORDS else "def.function"
            out.append(f"({kind} name: (_) @name) @{capture}")
            out.append(f"({kind} (identifier) @name) @{capture}")
        elif _CALL.match(kind):
            for field in ("function", "method", "name"):
                out.append(f"({kind} {field}: [(identifier) (field_expression) (member_expression)] @call)")
                out.append(f"({kind} {field}: (identifier) @call)")
    return out
