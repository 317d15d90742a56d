"""The user's own state directory, and the key that marks what audit-mcp made for this user on this machine.

The state directory (``$AUDIT_MCP_STATE_DIR``, else ``$XDG_STATE_HOME/audit-mcp``, else
``~/.local/state/audit-mcp``) lies outside every repository: nothing a checkout ships can be in it. It holds
the learned rate-limit state, the HTTP token, the audits of checkouts whose own artifacts folder could not be
trusted, and ``key``: 32 random bytes, readable by this user only, created on first use.

``seal`` signs text with that key (HMAC-SHA256). An artifacts folder carries a record sealed with it and
naming the folder's own path (``usecases.artifacts``), so a folder that came with a checkout, was copied from
another place, or was made by another user or machine is told apart from one this user's audit-mcp made here.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
import threading
from pathlib import Path

from audit_mcp.core.errors import ConfigError

STATE_ENV = "AUDIT_MCP_STATE_DIR"
KEY_FILENAME = "key"
_KEY_BYTES = 32
_lock = threading.Lock()
_keys: dict[Path, bytes] = {}


def state_dir() -> Path:
    """The user's state directory (not created here)."""
    base = os.environ.get(STATE_ENV, "").strip()
    if base:
        return Path(base).expanduser().absolute()
    xdg = os.environ.get("XDG_STATE_HOME", "").strip()
    return ((Path(xdg) if xdg else Path.home() / ".local" / "state") / "audit-mcp").absolute()


def state_arguments() -> list[str]:
    """``--state-dir DIR`` for a printed command when the state directory was chosen by ``AUDIT_MCP_STATE_DIR``
    (a reviewer's shell may not have the variable, and a different state directory holds a different key):
    nothing when it is the default."""
    return ["--state-dir", str(state_dir())] if os.environ.get(STATE_ENV, "").strip() else []


def private_dir(path: Path) -> Path:
    """``path`` as a folder of this user's (created readable by this user only when missing), or a
    ``ConfigError`` saying why it cannot hold private state."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.lstat()
    except OSError as exc:
        raise ConfigError(
            f"cannot use {path} for audit-mcp's own state: {exc.strerror or exc}; set {STATE_ENV} to a folder of yours"
        ) from exc
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{path} is not a folder; set {STATE_ENV} to a folder of yours for audit-mcp's own state")
    if st.st_uid != os.geteuid():
        raise ConfigError(
            f"{path} belongs to another user (uid {st.st_uid}); set {STATE_ENV} to a folder of yours for "
            "audit-mcp's own state"
        )
    return path


def read_private(path: Path, label: str, limit: int = 4096) -> bytes | None:
    """The bytes of a file only this user may read (``None`` when missing); a link, a file of another user's,
    or one others can read is refused with the command that fixes it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read {label} {path}: {exc.strerror or exc}; remove it to make a new one") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise ConfigError(f"{label} {path} is not a file of yours; remove it to make a new one")
        if st.st_mode & 0o077:
            raise ConfigError(f"{label} {path} can be read by other users; run `chmod 600 {path}`, or remove it")
        return os.read(fd, limit)
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes) -> bytes:
    """Create ``path`` with ``data``, readable by this user only, unless it exists: what the file holds
    afterwards (the first writer wins when several processes race)."""
    private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        with contextlib.suppress(FileExistsError):  # another process made it first: its bytes are read below
            os.link(tmp, path)  # never replaces a file another process made meanwhile
    finally:
        tmp.unlink(missing_ok=True)
    kept = read_private(path, "the file")
    assert kept is not None
    return kept


def user_key() -> bytes:
    """This user's key on this machine (made on first use)."""
    folder = state_dir()
    with _lock:
        if folder in _keys:
            return _keys[folder]
        path = folder / KEY_FILENAME
        key = read_private(path, "audit-mcp's key")
        if key is None:
            key = write_private(path, secrets.token_bytes(_KEY_BYTES))
        if len(key) != _KEY_BYTES:
            raise ConfigError(f"audit-mcp's key {path} is damaged ({len(key)} bytes); remove it to make a new one")
        _keys[folder] = key
        return key


def seal(*parts: str) -> str:
    """An HMAC of ``parts`` under this user's key, as hex (parts are joined with NUL, encoded losslessly)."""
    message = "\0".join(parts).encode("utf-8", "surrogateescape")
    return hmac.new(user_key(), message, hashlib.sha256).hexdigest()


def sealed(expected: str, *parts: str) -> bool:
    """Whether ``expected`` is ``seal(*parts)`` (compared in constant time)."""
    return hmac.compare_digest(expected.encode("ascii", "replace"), seal(*parts).encode("ascii"))
