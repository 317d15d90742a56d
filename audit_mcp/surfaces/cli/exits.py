"""The exit codes every verb uses, so a script can tell outcomes apart."""

from __future__ import annotations

EXIT_OK = 0
"""The verb did what it was asked (for ``run``: the audit is complete)."""
EXIT_ERROR = 1
"""An error in the arguments' values, the configuration or the state; the message is on stderr."""
EXIT_REFUSED = 2
"""A submission was refused; the receipt with every error is on stdout."""
EXIT_PARTIAL = 3
"""Work stopped short: the audit is partial, or a run stopped at a cooldown and can be resumed."""
EXIT_BLOCKED = 4
"""A person must act: the message (and the hand-off file) says what."""
EXIT_USAGE = 64
"""The command line itself is wrong."""
EXIT_INTERRUPTED = 130
"""Ctrl-C or SIGTERM; accepted work is saved."""
