"""Work blocks are units of change: one function, one helper, or one missing control at sibling call sites."""

from __future__ import annotations

import random
from typing import Any

import pytest

from audit_mcp.findings.blocks import work_blocks
from audit_mcp.findings.synthesis import synthesize


def _raw(**overrides: Any) -> dict[str, Any]:
    base = {
        "title": "t",
        "severity": "high",
        "confidence": "high",
        "category": "CWE-89",
        "file": "app/db.py",
        "start_line": 10,
        "end_line": 10,
        "evidence": "placeholder line",
        "description": "d",
        "recommendation": "r",
        "lens": "security",
        "packet_id": "A1-R1-P01",
        "run_id": "A1-R1",
    }
    return base | overrides


def _blocks(raws: list[dict[str, Any]]) -> list[tuple[list[str], str]]:
    s = synthesize(raws)
    titles = {f.finding_id: f.title for f in s.findings}
    return [(sorted(titles[i] for i in b.finding_ids), b.basis) for b in s.blocks]


def test_the_same_cwe_in_one_directory_at_unrelated_sites_is_one_block_per_fix() -> None:
    blocks = _blocks(
        [
            _raw(title="a", file="src/pkg/a.py", category="CWE-79", evidence="return render_template_string(body)"),
            _raw(title="b", file="src/pkg/b.py", category="CWE-79", evidence="html = '<p>' + name + '</p>'"),
            _raw(title="c", file="src/pkg/c.py", category="CWE-79", evidence="out.write(Markup(user_text))"),
            _raw(title="d", file="src/pkg/d.py", category="CWE-79", evidence="el.innerHTML = note.title"),
        ]
    )
    assert len(blocks) == 4
    assert all(basis == "one finding" for _, basis in blocks)


def test_findings_in_the_same_function_are_one_block() -> None:
    blocks = _blocks(
        [
            _raw(title="sql", symbol="find_user", evidence="conn.execute(query % name)", start_line=12, end_line=12),
            _raw(
                title="leak",
                symbol="find_user",
                category="CWE-209",
                evidence="return str(exc) to the client",
                start_line=20,
                end_line=20,
            ),
            _raw(title="other", symbol="list_users", category="CWE-400", evidence="fetchall() of every row"),
        ]
    )
    assert (["leak", "sql"], "the same function `find_user` in app/db.py") in blocks
    assert (["other"], "one finding") in blocks


def test_callers_that_reach_the_same_helper_are_one_block() -> None:
    helper = {"file": "app/query.py", "start_line": 5, "end_line": 7, "role": "sink"}
    blocks = _blocks(
        [
            _raw(title="a", file="app/users.py", evidence="run_query(user_filter)", related_locations=[helper]),
            _raw(title="b", file="app/notes.py", evidence="run_query(note_filter)", related_locations=[helper]),
            _raw(title="c", file="app/tags.py", evidence="tags.lookup(tag)"),
        ]
    )
    assert (["a", "b"], "the same helper at app/query.py:5") in blocks
    assert len(blocks) == 2


@pytest.mark.parametrize(
    ("second_file", "second_category", "joined"),
    [
        pytest.param("app/db.py", "CWE-89", True, id="same-file-same-control"),
        pytest.param("app/other.py", "CWE-89", True, id="sibling-file-same-directory"),
        pytest.param("web/db.js", "CWE-89", False, id="another-directory"),
        pytest.param("app/db.py", "CWE-78", False, id="another-category"),
    ],
)
def test_the_same_missing_control_at_sibling_calls_is_one_block(
    second_file: str, second_category: str, joined: bool
) -> None:
    blocks = _blocks(
        [
            _raw(title="a", evidence="cursor.execute(f'SELECT * FROM t WHERE a = {a}')", start_line=3, end_line=3),
            _raw(
                title="b",
                file=second_file,
                category=second_category,
                evidence="cursor.execute('DELETE FROM t WHERE b = ' + b)",
                start_line=40,
                end_line=40,
            ),
        ]
    )
    assert (len(blocks) == 1) is joined
    if joined:
        assert blocks[0][1] == "the same missing control at sibling calls of `execute()`"


def test_generic_calls_do_not_make_findings_siblings() -> None:
    blocks = _blocks(
        [
            _raw(title="a", evidence="value = str(len(items))", start_line=3, end_line=3),
            _raw(title="b", evidence="print(str(other))", start_line=30, end_line=30),
        ]
    )
    assert len(blocks) == 2


def test_blocks_come_most_severe_first_and_a_block_takes_its_worst_member() -> None:
    s = synthesize(
        [
            _raw(title="low", severity="low", symbol="f", evidence="x.execute(a)", start_line=1, end_line=1),
            _raw(title="crit", severity="critical", symbol="f", evidence="y.run(b)", start_line=9, end_line=9),
            _raw(title="med", severity="medium", file="app/z.py", evidence="z.call(c)"),
        ]
    )
    assert [(b.severity, b.effort, len(b.finding_ids)) for b in s.blocks] == [
        ("critical", "small", 2),
        ("medium", "small", 1),
    ]


def _each_with_each(findings: list[Any]) -> list[list[str]]:
    """The groups work_blocks made when it tested every pair of findings."""
    from audit_mcp.findings import blocks

    groups = blocks._Groups(len(findings))
    for i, a in enumerate(findings):
        for j in range(i + 1, len(findings)):
            b = findings[j]
            if blocks._same_function(a, b) or blocks._same_helper(a, b) or blocks._siblings(a, b):
                groups.join(i, j)
    members: dict[int, list[str]] = {}
    for i, f in enumerate(findings):
        members.setdefault(groups.find(i), []).append(f.finding_id)
    return sorted(sorted(m) for m in members.values())


@pytest.mark.parametrize("seed", range(12))
def test_comparing_findings_by_neighbourhood_groups_them_as_comparing_each_with_each(seed: int) -> None:
    rng = random.Random(seed)
    files = ["a/x.py", "a/y.py", "b/x.py", "b/z.py", "c.py"]
    raws = []
    for n in range(rng.randint(5, 40)):
        related = [
            {"file": rng.choice(files), "start_line": s, "end_line": s + rng.randint(0, 4), "role": "sink"}
            for s in rng.sample(range(1, 30), rng.randint(0, 2))
        ]
        start = rng.randint(1, 30)
        raws.append(
            _raw(
                title=f"t{n}",
                file=rng.choice(files),
                start_line=start,
                end_line=start + rng.randint(0, 3),
                category=rng.choice(["CWE-89", "CWE-79", "CWE-22"]),
                symbol=rng.choice([None, "f", "g"]),
                evidence=rng.choice(["run(query)", "send(body)", "open(path) and run(x)", "plain text"]) + f" {n}",
                related_locations=related,
            )
        )
    findings = synthesize(raws).findings
    expected = _each_with_each(findings)
    assert any(len(group) > 1 for group in expected)  # the draw links some findings, so grouping is tested
    assert sorted(sorted(b.finding_ids) for b in work_blocks(findings)) == expected
