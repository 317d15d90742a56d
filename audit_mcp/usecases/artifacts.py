"""Where a repository's audit state lives, and why a folder that only looks like audit state is never read.

Everything in a checkout is the code under audit's, including a ``.audit-mcp/`` folder it ships: a finished
audit with nothing found, packet prompts that tell reviewers to stop, results files at the paths a run will
use. So a folder is read as audit state only when this user's audit-mcp made it here: it is a real folder
(not a link), this user owns it and others cannot write it, git tracks nothing in it, and it holds
``binding.json``, a record sealed with this user's key (``core.userstate``) that names the folder's own path.
A folder that came with a checkout, was copied from another place, or was made by another user or machine
fails one of these.

A checkout's own ``.audit-mcp/`` that fails them is left alone, unread: the audit's state goes to a folder of
this checkout's in the user's state directory instead, and every step says so. A folder the user names with
``--artifacts-dir`` that fails them is refused with what to do. An empty folder (or one holding only its
``.gitignore``) is taken and sealed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import stat
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from audit_mcp.core.errors import ConfigError
from audit_mcp.core.fs import write_atomic
from audit_mcp.core.userstate import private_dir, seal, sealed, state_dir
from audit_mcp.engine.git import GitReader

ARTIFACTS_DIRNAME = ".audit-mcp"
BINDING_FILENAME = "binding.json"
CHECKOUTS_DIRNAME = "checkouts"
_FORMAT = 1
_PURPOSE = "audit-mcp artifacts"
_MAX_BINDING_BYTES = 4096
_IGNORABLE = {".gitignore"}


@dataclass(frozen=True)
class Artifacts:
    """The artifacts folder a workspace uses, and why the checkout's own one was passed over (if it was)."""

    path: Path
    passed_over: str | None = None  # the checkout's .audit-mcp and why it is not read, when it is not


def _reason(path: Path, *, under_root: Path | None) -> str | None:
    """Why ``path`` (which exists) cannot be read as audit state made here by this user, or ``None``."""
    try:
        st = path.lstat()
    except OSError as exc:
        return f"it cannot be examined ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        return f"it is a symbolic link (to {path.readlink()})"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a folder"
    if st.st_uid != os.geteuid():
        return f"it belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o002 and not st.st_mode & stat.S_ISVTX:
        return "every user can write in it"
    if under_root is not None and _tracked(under_root, path):
        return "git tracks files in it: it came with the checkout"
    problem = binding_problem(path)
    if problem is not None and not _empty(path):
        return problem
    return None


def binding_problem(path: Path) -> str | None:
    """Why ``path``'s binding record does not show this user's audit-mcp made the folder here, or ``None``."""
    target = path / BINDING_FILENAME
    try:
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return "it has no binding record: audit-mcp did not make it for you here (or an older version did)"
    except OSError as exc:
        return f"its binding record cannot be read ({exc.strerror or exc})"
    try:
        st = os.fstat(fd)
        raw = os.read(fd, _MAX_BINDING_BYTES) if stat.S_ISREG(st.st_mode) else b""
    finally:
        os.close(fd)
    try:
        doc = json.loads(raw)
        binding_id, named, tag = str(doc["id"]), str(doc["path"]), str(doc["seal"])
    except (ValueError, KeyError, TypeError):
        return "its binding record is not one audit-mcp wrote"
    if not re.fullmatch(r"[0-9a-f]{32}", binding_id):
        return "its binding record is not one audit-mcp wrote"
    if not sealed(tag, _PURPOSE, binding_id, named):
        return "its binding record was not made with your key (another user or machine made the folder)"
    if named != str(path):
        return f"its binding record was made for {named}: the folder was copied or moved here"
    return None


def binding_id(path: Path) -> str:
    """The id a bound folder's record holds (run ids carry a digest of it)."""
    doc = json.loads((path / BINDING_FILENAME).read_bytes())
    return str(doc["id"])


def bind(path: Path) -> str:
    """Create (or take, when empty) ``path`` as this user's artifacts folder and seal it; its binding id."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not binding_problem(path):
        return binding_id(path)
    new_id = secrets.token_hex(16)
    record = {
        "format": _FORMAT,
        "id": new_id,
        "path": str(path),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "seal": seal(_PURPOSE, new_id, str(path)),
        "note": "made by audit-mcp for its user on this machine; a copy of this folder anywhere else is not read",
    }
    target = path / BINDING_FILENAME
    text = json.dumps(record, indent=2) + "\n"
    if not target.exists() and not target.is_symlink():
        # Several processes may start on a new folder at once: the first record linked in is the folder's, and
        # every other process takes it (a replace would leave each with its own id, and its own run ids).
        fd, tmp = tempfile.mkstemp(dir=path, prefix=f".{BINDING_FILENAME}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(tmp, target)
                linked = True
            except FileExistsError:
                linked = True  # another process linked its record first: this one takes it
            except OSError:
                linked = False  # a file system without hard links: the record is written in place below
        finally:
            Path(tmp).unlink(missing_ok=True)
        if linked and not binding_problem(path):
            return binding_id(path)
    write_atomic(target, text)  # a record that is not this user's (an emptied folder's leftover) is replaced
    return binding_id(path)


def run_tag(binding: str) -> str:
    """Six hex digits that every run id of a bound folder carries: they tell its runs from those of any other
    root a server serves and, drawn from the folder's random binding id, cannot be guessed."""
    return hashlib.sha256(binding.encode("ascii")).hexdigest()[:6]


def _empty(path: Path) -> bool:
    try:
        with os.scandir(path) as entries:
            return all(entry.name in _IGNORABLE for entry in entries)
    except OSError:
        return False


def _tracked(root: Path, path: Path) -> bool:
    """Whether git tracks anything under ``path`` (a folder inside ``root``)."""
    return GitReader(root).tracks_under(path.relative_to(root).as_posix())


def checkout_home(root: Path) -> Path:
    """The folder in the user's state directory that holds the audit of a checkout whose own ``.audit-mcp``
    cannot be trusted: named after the checkout, unique to its path."""
    digest = hashlib.sha256(str(root).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", root.name)[:48] or "root"
    return state_dir() / CHECKOUTS_DIRNAME / f"{name}-{digest}"


def choose(root: Path, explicit: Path | None) -> Artifacts:
    """The artifacts folder for ``root`` (resolved): ``explicit`` when the user named one (refused when it
    holds something that is not this user's audit state), else the checkout's ``.audit-mcp`` when it is
    trustworthy or absent, else the checkout's folder in the state directory. Creates nothing."""
    if explicit is not None:
        path = explicit
        if path == root:
            raise ConfigError("the artifacts directory cannot be the repository root; pick a subfolder")
        if os.path.lexists(path):
            inside_root = root if root in path.parents else None
            problem = _reason(path, under_root=inside_root)
            if problem is not None:
                raise ConfigError(
                    f"--artifacts-dir {path} is not audit-mcp's state for you: {problem}. Nothing in it was read. "
                    "Pass a new or empty folder, or move this one away if it is yours and you no longer need it."
                )
        return Artifacts(path)
    default = root / ARTIFACTS_DIRNAME
    home = checkout_home(root)
    if not os.path.lexists(default):
        # A checkout whose untrusted folder was removed keeps the audit it has in the state directory.
        return Artifacts(home if (home / BINDING_FILENAME).is_file() and not binding_problem(home) else default)
    problem = _reason(default, under_root=root)
    if problem is None:
        return Artifacts(default)
    return Artifacts(home, passed_over=f"{default} is not read: {problem}")


def ensure(artifacts: Artifacts) -> str:
    """Create the chosen folder when missing, seal it, and return its binding id."""
    if artifacts.path.parent == state_dir() / CHECKOUTS_DIRNAME:
        private_dir(artifacts.path.parent)
    return bind(artifacts.path)
