"""The closed taxonomy of finding categories: CWE ids, and a fixed list of classes for what no CWE names.

A reviewer writes ``category`` as free text. ``classify`` files it under one id of the taxonomy: a CWE id
the text names (``CWE-89``); else a class or CWE whose name or usual wording the text uses ("SQL
injection" is ``CWE-89``, "N+1 queries" is ``n-plus-one``); else the lens's own catch-all class
(``other-performance``). A class with an exact CWE equivalent is filed as that CWE (``off-by-one`` is
``CWE-193``), so the two wordings are one category. SARIF rule ids and fingerprints derive from the id, so
the same defect reworded in the next audit keeps its alert; the reviewer's words are kept beside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from audit_mcp.core.cwe import CWE_NAMES, cwe_url

MAX_CWE = 9999
_CWE = re.compile(r"\bcwe[-_ ]?0*(\d{1,4})\b", re.I)

# id | name | what it is; grouped by the lens whose prompt lists them.
_CLASSES = """
prompt-injection-to-tool | Prompt injection reaching a tool | Attacker text steers a model into calling a tool.
n-plus-one | N+1 queries | One query per item of a list instead of one query for the list.
quadratic-loop | Quadratic loop | Nested iteration or repeated scans make the cost grow with the square of the input.
unbounded-input | Unbounded input | Input is read or buffered with no limit on its size.
blocking-io | Blocking I/O | Blocking I/O on a path that must stay responsive (an event loop, a request handler).
missing-timeout | Missing timeout | A network or process call can wait forever.
unbounded-cache | Unbounded cache | A cache or memo grows without bound.
repeated-work | Repeated work | The same result is computed again and again where it could be computed once.
string-concat-loop | String concatenation in a loop | A string is built by repeated concatenation in a loop.
large-copy | Large copy | Large data is copied where a view or a stream would do.
no-streaming | No streaming | Large data is loaded whole where it could be processed as a stream.
duplicated-logic | Duplicated logic | The same logic is written twice and the copies can drift apart.
over-engineering | Over-engineering | Abstraction or generality the code does not need makes it harder to change.
needless-indirection | Needless indirection | Layers that only forward calls hide what the code does.
god-function | God function | One function or class does too many unrelated things.
flag-argument | Flag argument | A boolean argument switches a function between different behaviours.
hidden-coupling | Hidden coupling | Modules depend on each other through shared state or unstated assumptions.
misleading-name | Misleading name | A name says something other than what the code does.
magic-value | Magic value | An unexplained literal stands for a rule that belongs in one named place.
inconsistent-pattern | Inconsistent pattern | The same job is done differently in different places.
untested-branch | Untested branch | A branch with its own behaviour has no test that runs it.
untested-risky-code | Untested risky code | Code whose failure would be costly has no test.
vacuous-test | Vacuous test | A test that cannot fail, or checks nothing the code does.
weak-assertion | Weak assertion | An assertion too loose to catch the defects it is there for.
over-mocking | Over-mocking | Mocks replace the behaviour the test should be checking.
wrong-reason-pass | Test passing for the wrong reason | A test passes although the behaviour it names is broken.
order-dependent-test | Order-dependent test | A test passes or fails depending on which tests ran before it.
flaky-test | Flaky test | A test that passes or fails without any change to the code.
skipped-test | Skipped test | A test is skipped or disabled without a reason that still holds.
asserts-bug | Test asserting a bug | A test pins down behaviour that is itself wrong.
broken-fixture | Broken fixture | A fixture or test setup does not build the state the tests assume.
lock-order | Lock order | Locks are taken in different orders on different paths.
unbalanced-lock | Unbalanced lock | A lock is not released on some path.
blocking-in-async | Blocking call in async code | A blocking call inside async code stalls the event loop.
missing-await | Missing await | A coroutine or promise is created and never awaited.
dropped-task | Dropped task | A background task is started and then lost, with its errors.
non-thread-safe-api | Non-thread-safe API | An API that is not thread-safe is used from several threads.
double-init | Double initialisation | Something meant to be set up once can be set up twice concurrently.
lost-wakeup | Lost wakeup | A notification can be sent before the waiter waits, so it waits forever.
unhandled-rejection | Unhandled rejection | A failed promise or future is never handled.
error-not-propagated | Error not propagated | A failure is turned into success or a default value on its way up.
partial-state | Partial state | A failure half-way leaves data or state partly updated.
leak-on-error-path | Leak on the error path | A resource is released on success but not on failure.
lost-error-context | Lost error context | An error is re-raised or logged without the cause that explains it.
cleanup-masks-error | Cleanup masking the error | An error in cleanup replaces the original error.
wrong-argument | Wrong argument | A call passes the wrong value, unit or argument.
return-value-misuse | Return value misuse | A return value is used as something it is not.
falsy-check | Falsy check | A truthiness test treats a valid value (0, empty) as missing.
mutable-default | Mutable default | A mutable default value is shared between calls.
inverted-condition | Inverted condition | A condition tests the opposite of what the code needs.
numeric-precision | Numeric precision | Floating-point or rounding error gives wrong results.
timezone | Time zone | Naive and aware times, or different zones, are mixed.
stale-state | Stale state | Code acts on a value that has since changed.
contract-violation | Contract violation | A function breaks what its callers rely on (types, invariants, documents).
encoding | Encoding | Text is encoded or decoded with the wrong or an assumed encoding.
"""

# Classes the lens prompts name whose defect has an exact CWE: filed as that CWE.
_CWE_EQUIVALENTS = {
    "off-by-one": "193",
    "data-race": "362",
    "race-condition": "362",
    "toctou": "367",
    "check-then-act": "367",
    "swallowed-exception": "390",
    "broad-catch": "396",
    "unchecked-return": "252",
    "fail-open": "636",
    "fail-open-auth": "636",
    "resource-leak": "772",
    "redos": "1333",
    "dead-code": "561",
    "deadlock": "833",
    "signal-unsafe": "479",
    "hardcoded-secret": "798",
    "hardcoded-credentials": "798",
    "sqli": "89",
    "xss": "79",
    "ssrf": "918",
    "csrf": "352",
    "xxe": "611",
    "idor": "639",
}

# Usual wordings, most specific first; searched in the lower-cased text.
_PHRASES: tuple[tuple[str, str], ...] = (
    (r"\bn\s*\+\s*1\b|n-plus-one|query (?:per|in a) (?:loop|item|row)", "n-plus-one"),
    (r"no[\s_-]*sql[\s_-]*injection|nosql", "CWE-943"),
    (r"sql[\s_-]*injection|\bsqli\b|sql built (?:by|from)|unparameteri[sz]ed (?:sql|query)", "CWE-89"),
    (r"(?:os|shell)[\s_-]*command[\s_-]*injection|shell[\s_-]*injection|shell=true", "CWE-78"),
    (r"command[\s_-]*injection", "CWE-77"),
    (r"template[\s_-]*injection|\bssti\b", "CWE-1336"),
    (r"ldap[\s_-]*injection", "CWE-90"),
    (r"xpath[\s_-]*injection", "CWE-643"),
    (r"log[\s_-]*(?:injection|forging)", "CWE-117"),
    (r"header[\s_-]*injection|response[\s_-]*splitting|crlf[\s_-]*injection", "CWE-113"),
    (r"prompt[\s_-]*injection", "prompt-injection-to-tool"),
    (r"code[\s_-]*injection|\beval\b", "CWE-94"),
    (r"cross[\s_-]*site[\s_-]*scripting|\bxss\b", "CWE-79"),
    (r"cross[\s_-]*site[\s_-]*request|\bcsrf\b|\bxsrf\b", "CWE-352"),
    (r"server[\s_-]*side[\s_-]*request|\bssrf\b", "CWE-918"),
    (r"\bxxe\b|xml[\s_-]*external[\s_-]*entit", "CWE-611"),
    (r"path[\s_-]*traversal|directory[\s_-]*traversal|zip[\s_-]*slip|\.\./", "CWE-22"),
    (r"open[\s_-]*redirect", "CWE-601"),
    (r"deseriali[sz]|\bpickle\b|yaml\.load", "CWE-502"),
    (r"prototype[\s_-]*pollution", "CWE-1321"),
    (r"mass[\s_-]*assignment", "CWE-915"),
    (
        r"hard[\s_-]*cod(?:ed|ing)[\s_-]*(?:secret|credential|password|key|token)"
        r"|(?:secret|password|key|token) in (?:the )?source",
        "CWE-798",
    ),
    (r"(?:secret|password|token|credential|personal data)s? (?:in|to) (?:the )?logs?", "CWE-532"),
    (r"\bidor\b|insecure direct object", "CWE-639"),
    (r"missing[\s_-]*(?:authori[sz]ation|access[\s_-]*control|permission[\s_-]*check)", "CWE-862"),
    (r"(?:incorrect|broken|wrong)[\s_-]*authori[sz]ation", "CWE-863"),
    (r"missing[\s_-]*authentication|unauthenticated", "CWE-306"),
    (r"(?:broken|improper|weak)[\s_-]*authentication|auth(?:entication)?[\s_-]*bypass", "CWE-287"),
    (r"session[\s_-]*fixation", "CWE-384"),
    (r"certificate[\s_-]*(?:validation|verification)|verify\s*=\s*false|tls[\s_-]*verification", "CWE-295"),
    (r"timing[\s_-]*(?:attack|side[\s_-]*channel|leak)|constant[\s_-]*time", "CWE-208"),
    (r"weak[\s_-]*password[\s_-]*hash|unsalted", "CWE-916"),
    (r"weak[\s_-]*hash|\bmd5\b|\bsha-?1\b", "CWE-328"),
    (r"weak[\s_-]*(?:crypto|cipher|encryption)|broken[\s_-]*crypto|\becb\b", "CWE-327"),
    (r"(?:insecure|weak|predictable)[\s_-]*random", "CWE-330"),
    (r"cleartext[\s_-]*(?:transmission|http)|plain[\s_-]*http", "CWE-319"),
    (r"cleartext|plain[\s_-]*text[\s_-]*(?:password|secret|storage)", "CWE-312"),
    (r"(?:sensitive|information)[\s_-]*(?:data[\s_-]*)?(?:exposure|disclosure|leak)|info[\s_-]*leak", "CWE-200"),
    (r"insecure[\s_-]*temp|mktemp", "CWE-377"),
    (r"(?:world[\s_-]*writable|insecure|wide|incorrect)[\s_-]*permission", "CWE-732"),
    (r"clickjacking|frame[\s_-]*options", "CWE-1021"),
    (r"\bredos\b|catastrophic[\s_-]*backtracking|regex[\s_-]*dos|inefficient[\s_-]*regular", "CWE-1333"),
    (r"decompression[\s_-]*bomb|zip[\s_-]*bomb", "CWE-409"),
    (r"time[\s_-]*of[\s_-]*check|\btoctou\b|check[\s_-]*then[\s_-]*(?:act|use)", "CWE-367"),
    (r"dead[\s_-]*lock", "CWE-833"),
    (
        r"race[\s_-]*condition|data[\s_-]*race|\brace\b|unsynchroni[sz]ed|lost[\s_-]*update|not thread[\s_-]*safe",
        "CWE-362",
    ),
    (r"off[\s_-]*by[\s_-]*one|fence[\s_-]*post", "CWE-193"),
    (r"integer[\s_-]*overflow|wrap[\s_-]*around", "CWE-190"),
    (r"divi(?:de|sion)[\s_-]*by[\s_-]*zero|zero[\s_-]*division", "CWE-369"),
    (r"null[\s_-]*(?:pointer|dereference)|none[\s_-]*dereference|nonetype", "CWE-476"),
    (r"infinite[\s_-]*loop", "CWE-835"),
    (r"use[\s_-]*after[\s_-]*free", "CWE-416"),
    (r"buffer[\s_-]*overflow|out[\s_-]*of[\s_-]*bounds[\s_-]*write", "CWE-120"),
    (r"format[\s_-]*string", "CWE-134"),
    (r"swallow|silently[\s_-]*(?:ignor|drop|discard)|ignored[\s_-]*(?:error|exception)|empty[\s_-]*except", "CWE-390"),
    (r"(?:broad|bare|generic|catch[\s_-]*all)[\s_-]*(?:except|catch)", "CWE-396"),
    (r"unchecked[\s_-]*(?:return|result|error)|ignored[\s_-]*return", "CWE-252"),
    (r"fail(?:s|ing)?[\s_-]*open", "CWE-636"),
    (r"resource[\s_-]*leak|(?:file|socket|connection|handle)[\s_-]*(?:leak|not[\s_-]*closed)|unclosed", "CWE-772"),
    (r"memory[\s_-]*leak", "CWE-401"),
    (
        r"(?:resource|memory)[\s_-]*exhaustion|denial[\s_-]*of[\s_-]*service|\bdos\b|unbounded[\s_-]*(?:memory|alloc)",
        "CWE-400",
    ),
    (r"dead[\s_-]*code|unreachable[\s_-]*code", "CWE-561"),
    (r"duplicat|copy[\s_-]*(?:and[\s_-]*)?past|copied[\s_-]*logic", "duplicated-logic"),
    (r"debug[\s_-]*(?:mode|code|enabled)", "CWE-489"),
    (r"input[\s_-]*validation|unvalidated[\s_-]*input", "CWE-20"),
    (r"injection", "CWE-74"),
)


@dataclass(frozen=True)
class Category:
    """One entry of the taxonomy."""

    category_id: str  # "CWE-89", or a class such as "n-plus-one" or "other-performance"
    name: str
    description: str
    cwe: str | None = None

    @property
    def help_uri(self) -> str | None:
        return cwe_url(self.cwe) if self.cwe else None


@dataclass(frozen=True)
class Filing:
    """Where a reviewer's category text was filed, and on what basis (``cwe``, ``class``, ``wording``, ``lens``)."""

    category_id: str
    basis: str


CLASSES: dict[str, tuple[str, str]] = {
    cid.strip(): (name.strip(), what.strip())
    for cid, name, what in (line.split(" | ", 2) for line in _CLASSES.strip().splitlines())
}
_SLUG = re.compile(r"[^a-z0-9]+")


def slug(text: str) -> str:
    return _SLUG.sub("-", text.strip().lower()).strip("-")


def lens_class(lens: str) -> str:
    """The catch-all class of a lens, for a category that names nothing more specific."""
    return f"other-{slug(lens) or 'finding'}"


@cache
def _wordings() -> tuple[tuple[re.Pattern[str], str], ...]:
    # Compiled on the first category that needs them: most readers (status, the report) take the id filed
    # at submission and never classify.
    return tuple((re.compile(pattern, re.I), target) for pattern, target in _PHRASES)


def classify(text: str, lens: str) -> Filing:
    """The taxonomy id for a reviewer's category text, given the lens it was reported under."""
    if (m := _CWE.search(text)) and 1 <= int(m.group(1)) <= MAX_CWE:
        return Filing(f"CWE-{int(m.group(1))}", "cwe")
    key = slug(text)
    if key in _CWE_EQUIVALENTS:
        return Filing(f"CWE-{_CWE_EQUIVALENTS[key]}", "class")
    if key in CLASSES:
        return Filing(key, "class")
    for pattern, target in _wordings():
        if pattern.search(text):
            return Filing(target, "wording")
    words = f"-{key}-"
    for cid in CLASSES:
        if f"-{cid}-" in words:
            return Filing(cid, "wording")
    for alias, number in _CWE_EQUIVALENTS.items():
        if f"-{alias}-" in words:
            return Filing(f"CWE-{number}", "wording")
    return Filing(lens_class(lens), "lens")


def describe(category_id: str) -> Category:
    """Name and description of a taxonomy id (any id ``classify`` returns)."""
    if category_id.startswith("CWE-"):
        number = category_id.removeprefix("CWE-")
        name, what = CWE_NAMES.get(number, (category_id, f"The weakness {category_id} of MITRE's CWE list."))
        return Category(category_id, name, what, number)
    if category_id in CLASSES:
        name, what = CLASSES[category_id]
        return Category(category_id, name, what)
    lens = category_id.removeprefix("other-").replace("-", " ")
    return Category(
        category_id,
        f"Other {lens} finding",
        f"A finding of the {lens} lens whose category names no CWE id or listed class.",
    )


def is_cwe(category_id: str) -> bool:
    return category_id.startswith("CWE-")
