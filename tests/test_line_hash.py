"""GitHub's primaryLocationLineHash, against vectors of github/codeql-action's own fingerprints tests and
values its TypeScript computed for the same bytes; and evidence columns in UTF-16 code units."""

from __future__ import annotations

import pytest

from audit_mcp.findings.line_hash import line_hashes, primary_location_line_hash
from audit_mcp.findings.regions import evidence_columns, file_lines

LOREM = b"Lorem ipsum dolor sit amet.\n" * 10
PY = b"import os\n\ndef main():\n    return os.getcwd()\n"
REPEATED = b"x = 1\n" * 30

VECTORS = [
    (b"", 1, "c129715d7a2bc9a3:1"),
    (b" a\nb\n  \t\tc\n d", 1, "271789c17abda88f:1"),
    (b" a\nb\n  \t\tc\n d", 2, "54703d4cd895b18:1"),
    (b" a\nb\n  \t\tc\n d", 3, "180aee12dab6264:1"),
    (b" a\nb\n  \t\tc\n d", 4, "a23a3dc5e078b07b:1"),
    (LOREM, 1, "a7f2ff13bc495cf2:1"),
    (LOREM, 6, "a7f2ff13bc495cf2:6"),
    (LOREM, 7, "a7f2ff1481e87703:1"),
    (LOREM, 11, "c129715d7a2bc9a3:1"),
    (PY, 1, "8c50194370887666:1"),
    (PY, 2, "34fe5873fa6364db:1"),
    (PY, 4, "12c7c6f636a47224:1"),
    (PY, 5, "c129715d7a2bc9a3:1"),
    (b"a\r\n\r\nb\r\n", 1, "818c3a85b988abe4:1"),
    (b"a\r\n\r\nb\r\n", 3, "ade70578248be16f:1"),
    (b"one\ntwo", 2, "7926ff05c299dd0d:1"),
    (b"\xef\xbb\xbfimport os\nprint(1)\n", 1, "18bed4a2d98a701e:1"),
    (REPEATED, 1, "ca3e9a077b09da0c:1"),
    (REPEATED, 2, "ca3e9a077b09da0c:2"),
    (REPEATED, 12, "e57a44f13c7829f7:1"),
    (REPEATED, 30, "8e00d41f0ebba6bf:1"),
    ("s = '\U0001f600'\n".encode(), 1, "9df057cbed7b445c:1"),
]


@pytest.mark.parametrize(("data", "line", "expected"), VECTORS, ids=[f"{d[:12]!r}-{n}" for d, n, _ in VECTORS])
def test_line_hashes_match_the_upload_action(data: bytes, line: int, expected: str) -> None:
    assert primary_location_line_hash(data, line) == expected


def test_a_file_ending_in_a_newline_has_one_more_line_and_lines_past_the_end_have_none() -> None:
    assert len(line_hashes(b"a\nb\n")) == 3 and len(line_hashes(b"a\nb")) == 2
    assert primary_location_line_hash(b"one\ntwo", 3) is None
    assert primary_location_line_hash(b"one\ntwo", 0) is None


def test_cr_lf_and_crlf_hash_alike_and_spaces_never_count() -> None:
    assert line_hashes(b"a\r\nb\r\n") == line_hashes(b"a\nb\n") == line_hashes(b"a\rb\r")
    assert line_hashes(b"  a = 1\n\tb\n") == line_hashes(b"a=1\nb\n")


@pytest.mark.parametrize(
    ("text", "start", "end", "evidence", "columns"),
    [
        ("x = 1\n    cursor.execute(query)\n", 2, 2, "cursor.execute(query)", (5, 26)),
        ("a\n    q = f'{name}'\n    run(q)\n", 2, 3, "q = f'{name}'\nrun(q)", (5, 11)),
        ("s = '\U0001f600'; eval(s)\n", 1, 1, "eval(s)", (11, 18)),  # the emoji is two UTF-16 units
        ("x = 1\ny = 2\nz = 3\n", 1, 3, "y = 2", None),  # evidence covers part of the range
        ("x  =  1\n", 1, 1, "x = 1", None),  # matched whitespace-insensitively only: unknown
        ("x = 1\n", 2, 2, "x = 1", None),  # past the end
    ],
    ids=["one-line", "two-lines", "utf16", "partial-range", "squashed-only", "past-the-end"],
)
def test_evidence_columns_are_known_only_where_the_quote_pins_them(
    text: str, start: int, end: int, evidence: str, columns: tuple[int, int] | None
) -> None:
    assert evidence_columns(file_lines(text.encode()), start, end, evidence) == columns
