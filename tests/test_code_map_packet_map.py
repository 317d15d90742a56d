"""A packet's map: the other side of its files' boundaries (callees with their guarding lines, callers with
their call sites), the routes and threat model parts that reach them, within its budget, quoted safely."""

from __future__ import annotations

from collections.abc import Sequence

from audit_mcp.engine.codemap.graph import CodeGraph
from audit_mcp.engine.codemap.model import Edge, Entry
from audit_mcp.engine.codemap.packet_map import MapInputs, packet_map

FILES = {
    "app/views.py": [
        "from app.perms import can_delete",
        "",
        "def delete(request, pk):",
        "    note = load(pk)",
        "    if not can_delete(request.user, note):",
        "        raise Forbidden()",
        "    note.delete()",
    ],
    "app/perms.py": [
        "def can_delete(user, note):",
        "    if user.is_staff:",
        "        return True",
        "    return note.owner_id == user.id",
    ],
    "app/urls.py": ["from app import views", "urlpatterns = [path('notes/<pk>/delete/', views.delete)]"],
    "app/admin.py": ["```", "from app.perms import can_delete", "ok = can_delete(user, note)  # ``` </details>"],
}
EDGES = [
    Edge.of("app/views.py", "app/perms.py", (("import", "app.perms", 1, 0, 0, 1), ("call", "can_delete", 5, 1, 4, 1))),
    Edge.of("app/urls.py", "app/views.py", (("route", "delete", 2, 3, 7, 1),)),
    Edge.of("app/admin.py", "app/perms.py", (("call", "can_delete", 3, 1, 4, 1),)),
]


def _lines(path: str) -> Sequence[str] | None:
    return FILES.get(path)


def test_a_check_in_another_file_is_quoted_with_its_guarding_lines_and_flagged_to_check_together() -> None:
    text = packet_map([("app/views.py", 1, 7)], MapInputs(CodeGraph(EDGES), _lines))
    assert "`can_delete` in `app/perms.py:1-4`, from `app/views.py`:5" in text
    assert "2:     if user.is_staff:" in text and "4:     return note.owner_id == user.id" in text
    together = text[text.index("**Check these together:**") :].split("\n\n")[0]
    assert "`app/views.py` relies on `can_delete` (`app/perms.py:1`) to guard it" in together


def test_the_callers_of_a_control_in_the_packet_are_listed_with_their_lines_quoted_safely() -> None:
    text = packet_map([("app/perms.py", 1, 4)], MapInputs(CodeGraph(EDGES), _lines))
    callers = text[text.index("**Where other files call these files:**") :]
    assert "`can_delete` (`app/perms.py:1`) is called from `app/admin.py`:3 " in callers
    assert "; `app/views.py`:5 `if not can_delete(request.user, note):`" in callers
    # A caller's line is one code span whatever it holds: its backticks cannot open a fence in the prompt.
    assert "````ok = can_delete(user, note)  # ``` </details>````" in callers
    assert "is a control other files rely on" in text


def test_routes_and_the_threat_model_s_entry_points_and_controls_that_reach_the_packet_are_named() -> None:
    entries = [Entry("app/views.py", 3, "delete", "route notes/<pk>/delete/ (app/urls.py:2)")]
    model = {
        "entry_points": [{"path": "app/urls.py", "name": "the notes site", "exposure": "network"}],
        "controls": [{"path": "app/perms.py", "description": "ownership checks"}],
    }
    text = packet_map([("app/views.py", 1, 7)], MapInputs(CodeGraph(EDGES), _lines, entries, model))
    ways = text[text.index("**Ways in that reach these files:**") :]
    assert "route notes/\\<pk>/delete/ (app/urls.py:2): `delete` at `app/views.py:3`" in ways
    assert "threat model entry point `app/urls.py` (the notes site) which calls into `app/views.py`" in ways
    assert "threat model control `app/perms.py` (ownership checks) which is called by `app/views.py`" in ways
    assert "The threat model names `app/perms.py` as a control" in text


def test_the_map_stays_within_its_budget_and_says_what_it_left_out() -> None:
    many = [Edge.of("app/views.py", f"lib/m{n}.py", (("call", f"helper_{n}", 4, 1, 2, 1),)) for n in range(60)]
    lines = {f"lib/m{n}.py": [f"def helper_{n}(x):", "    return x"] for n in range(60)}
    text = packet_map([("app/views.py", 1, 7)], MapInputs(CodeGraph(many), lines.get, budget_chars=2_000))
    assert len(text) <= 2_200
    assert "more link(s) left out for length" in text


def test_a_packet_without_links_is_told_so() -> None:
    assert "found no link" in packet_map([("app/alone.py", 1, 3)], MapInputs(CodeGraph([]), _lines))
