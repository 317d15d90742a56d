"""A file's status as proof that its bytes are the ones read before, as git decides a file is clean.

When a file is read and hashed, its status is recorded with the row: device, inode, size, modification and
change times in nanoseconds, and the scope rules it was judged by (the config and the file's
``.gitattributes`` marks). Later, a file whose ``lstat`` gives the same record still has the bytes that were
hashed, so it need not be read again; any difference, however small, means reading and hashing it.

Why this holds against code under audit that tries to fool it:
- Any write to a file moves its change time to the current time, and so does every change of its status
  (``utime``, ``chmod``, rename, link); an unprivileged process cannot set the change time back.
- A file replaced by another one, a symlink or a directory has another inode or another type; ``lstat`` never
  follows a final symlink, and only a regular file is ever vouched for.
- Racy timestamps: a file written twice within one tick of the file system's clock (or one whose 2-second
  granule the read shared) can keep the same record across the second write. A file whose modification or
  change time is less than ``RACY_NS`` before the moment it was read, or after it, gets no record at all, so
  it is read again every time until its record is taken later, when the time since its last change says
  a new write would show.
"""

from __future__ import annotations

import os
import stat

from audit_mcp.engine.scoping import Scoper

RACY_NS = 3_000_000_000
"""How long before a read a file's last change must be for its status to vouch for it: the coarsest common
timestamp granule (FAT's 2 seconds) plus the lag of the kernel's coarse clock, with room to spare."""


def rules(scoper: Scoper, path: str) -> str:
    """What decides the scope of ``path`` besides its bytes: the config and the path's attribute marks."""
    return scoper.rules_digest if not scoper.attributes else f"{scoper.rules_digest}:{scoper.marks(path)!r}"


def record(st: os.stat_result, scoper: Scoper, path: str, read_at_ns: int) -> str | None:
    """The record of a regular file's status taken just before it was read at ``read_at_ns``, or ``None``
    when the status cannot vouch for its bytes (racy timestamps, not a regular file)."""
    if not stat.S_ISREG(st.st_mode):
        return None
    if max(st.st_mtime_ns, st.st_ctime_ns) >= read_at_ns - RACY_NS:
        return None
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{rules(scoper, path)}"


def unchanged(full_path: str, recorded: str | None, scoper: Scoper, path: str) -> bool:
    """Whether the file at ``full_path`` (``path`` inside the root) certainly still has the bytes read when
    ``recorded`` was taken: its status says exactly the same, under the same scope rules."""
    if recorded is None:
        return False
    try:
        st = os.lstat(full_path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    now = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{rules(scoper, path)}"
    return now == recorded
