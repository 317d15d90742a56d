"""The CWE weaknesses audits meet most: a short name and a one-line description each, for SARIF rules.

Any CWE id is a valid category (``taxonomy`` accepts CWE-1 to CWE-9999); these are the ones whose rule
text names the weakness rather than only its number. The MITRE entry of every id is at ``cwe_url``.
"""

from __future__ import annotations

# id | name | what the weakness is, in one line
_TABLE = """
20 | Improper input validation | Input is used without checking that it has the form and range the code assumes.
22 | Path traversal | A path built from outside input is not confined to its directory, so '..' reaches other files.
74 | Injection | Outside input is placed into text that an interpreter parses, without neutralising its syntax.
77 | Command injection | Outside input becomes part of a command line that is then run.
78 | OS command injection | Outside input reaches a shell or process call and can change the command it runs.
79 | Cross-site scripting | Outside input is written into a web page without escaping, so it runs as script.
89 | SQL injection | Outside input reaches a SQL statement as text instead of a bound parameter.
90 | LDAP injection | Outside input changes the meaning of an LDAP query.
94 | Code injection | Outside input is evaluated or compiled as code.
113 | HTTP header injection | Outside input with line breaks reaches an HTTP header and can add headers or a body.
117 | Log injection | Outside input is written to a log unescaped, so it can forge or corrupt entries.
120 | Buffer overflow | Data is copied into a buffer without checking that it fits.
134 | Format string | Outside input is used as a format string.
190 | Integer overflow | An arithmetic result wraps around or exceeds its type, and the code relies on it.
193 | Off-by-one | A bound, index or count is one too high or one too low.
200 | Sensitive information exposure | Information is shown to someone who is not allowed to see it.
208 | Timing discrepancy | A comparison's duration reveals secret data (compare secrets in constant time).
252 | Unchecked return value | A call's result or error status is ignored, so a failure goes unnoticed.
269 | Improper privilege management | Privileges are granted, kept or dropped incorrectly.
276 | Incorrect default permissions | Files or resources are created with permissions wider than needed.
284 | Improper access control | Access to a resource is not restricted to those entitled to it.
285 | Improper authorization | The check of what an actor may do is missing or wrong.
287 | Improper authentication | The claim of who an actor is is not proven adequately.
295 | Improper certificate validation | A TLS certificate is not validated, so a man in the middle goes unnoticed.
306 | Missing authentication | A function that needs to know who calls it requires no authentication.
311 | Missing encryption | Sensitive data is stored or sent without encryption.
312 | Cleartext storage | Sensitive data is stored in clear text.
319 | Cleartext transmission | Sensitive data is sent over an unencrypted channel.
327 | Broken or risky cryptography | A cryptographic algorithm or mode that is broken or unsuitable is used.
328 | Weak hash | A hash function too weak for its purpose is used.
330 | Insufficiently random values | Values that must be unpredictable come from a predictable source.
338 | Weak random number generator | A non-cryptographic random generator is used where security depends on it.
347 | Unverified signature | A cryptographic signature is not verified, or verified incorrectly.
352 | Cross-site request forgery | A state-changing request is accepted without proof the user meant to send it.
362 | Race condition | Concurrent code shares a resource without the synchronisation its correctness needs.
366 | Race within a thread | Two operations of one thread on shared data can interleave with another thread's.
367 | Time-of-check to time-of-use | A resource is checked, then used, and can change in between.
369 | Divide by zero | A division's divisor can be zero.
377 | Insecure temporary file | A temporary file is created in a way others can predict, read or replace.
384 | Session fixation | A session id is not renewed at login, so an attacker can plant one.
390 | Error detected without action | An error is caught or detected and then ignored.
391 | Unchecked error condition | An error condition is not checked for at all.
396 | Catching a generic exception | A catch-all handler hides failures it was never meant to handle.
400 | Uncontrolled resource consumption | Memory, CPU, disk or connections can be exhausted: nothing bounds them.
401 | Memory leak | Memory is not released after its last use.
404 | Improper resource release | A resource is not released, or released incorrectly, when it is done with.
407 | Inefficient algorithmic complexity | An algorithm's cost grows much faster than needed with its input.
409 | Decompression bomb | Compressed input is expanded without a bound on the result.
416 | Use after free | Memory is used after it has been released.
434 | Dangerous file upload | Uploaded files of a dangerous type are accepted and can be served or run.
457 | Uninitialized variable | A variable is used before it is given a value.
476 | Null dereference | A null (None, nil) value is dereferenced.
479 | Non-reentrant signal handler | A signal handler calls functions that are not safe to call there.
480 | Incorrect operator | The wrong operator is used (assignment for comparison, and for or, and the like).
489 | Active debug code | Debugging code or settings are left enabled in a deployed path.
502 | Deserialization of untrusted data | Untrusted bytes are deserialised by a format that can build any object.
521 | Weak password requirements | Passwords are accepted without adequate strength requirements.
532 | Sensitive information in logs | Secrets or personal data are written to logs.
561 | Dead code | Code that can never run is kept.
601 | Open redirect | A redirect target comes from outside input without being checked.
611 | XML external entities | An XML parser resolves external entities from untrusted documents.
613 | Insufficient session expiration | Sessions stay valid too long, or after logout.
628 | Incorrectly specified arguments | A function is called with arguments in the wrong order, number or type.
636 | Failing open | On an error, the code grants access or skips a check instead of refusing.
639 | Insecure direct object reference | A user-controlled key selects a record without checking the user may access it.
643 | XPath injection | Outside input changes the meaning of an XPath query.
667 | Improper locking | A lock is not taken, released or held as the shared state requires.
682 | Incorrect calculation | A calculation gives a wrong result that the code then relies on.
703 | Improper exception handling | Exceptional conditions are not checked for or handled properly.
732 | Incorrect permission assignment | A critical resource is given permissions that let others read or change it.
755 | Improper handling of exceptional conditions | An exceptional condition is handled so the program goes wrong.
764 | Multiple locks | A lock is taken more times than it is released, or the reverse.
770 | Allocation without limits | Resources are allocated on request with no limit or throttle.
772 | Resource not released | A resource is not released after its last use (files, sockets, connections).
787 | Out-of-bounds write | Data is written past the end or before the start of a buffer.
798 | Hard-coded credentials | A password, key or token is written in the source.
833 | Deadlock | Threads or tasks wait on each other forever.
835 | Infinite loop | A loop's exit condition can never be reached.
862 | Missing authorization | An action is performed without checking that the actor may perform it.
863 | Incorrect authorization | The authorization check exists but decides wrongly.
915 | Mass assignment | Outside input can set object attributes that were never meant to be set.
916 | Weak password hash | Passwords are hashed with too little computational effort.
918 | Server-side request forgery | The server fetches a URL that outside input chooses.
943 | NoSQL injection | Outside input changes the logic of a data query (NoSQL, ORM filters).
1021 | Clickjacking | A page can be framed by another site, so its UI can be used against its user.
1041 | Redundant code | The same logic is written more than once.
1321 | Prototype pollution | Outside input can add or change properties of an object prototype.
1333 | Inefficient regular expression | A regular expression can take exponential time on crafted input (ReDoS).
1336 | Template injection | Outside input is evaluated as template code.
"""

CWE_NAMES: dict[str, tuple[str, str]] = {
    number.strip(): (name.strip(), summary.strip())
    for number, name, summary in (line.split(" | ", 2) for line in _TABLE.strip().splitlines())
}


def cwe_url(number: str) -> str:
    """MITRE's page for one CWE id."""
    return f"https://cwe.mitre.org/data/definitions/{number}.html"
