"""One repository's workspace: its root, artifacts directory, store, learned state, clock and file paths.

Every use case takes a ``Workspace``; the facade (``AuditService``) is one.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING

from audit_mcp.core.config import SessionConfig, load_config
from audit_mcp.core.errors import ConfigError, NotFoundError, PathError
from audit_mcp.core.fs import resolve_inside, write_atomic
from audit_mcp.core.userstate import seal
from audit_mcp.scheduling.learned import LearnedStore
from audit_mcp.store.backends import Store, open_store, shared_documents
from audit_mcp.store.identity import store_kind
from audit_mcp.store.records import AuditRow, FileRow, RunRow
from audit_mcp.store.sqlite import DB_FILENAME
from audit_mcp.store.tx import Tx
from audit_mcp.usecases import artifacts
from audit_mcp.usecases.artifacts import ARTIFACTS_DIRNAME
from audit_mcp.usecases.identity import repo_identity
from audit_mcp.usecases.memo import Memo

if TYPE_CHECKING:
    import httpx  # imported where a probe is made, never at start

__all__ = ["ARTIFACTS_DIRNAME", "Clock", "Workspace", "iso", "store_settings"]

Clock = Callable[[], datetime]


def iso(moment: datetime) -> str:
    """A moment as the UTC timestamp every file and row uses (``2026-12-01T08:55:07Z``)."""
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def store_settings(
    root: Path, config_path: Path | None, store: str | None, audit_name: str | None
) -> tuple[str | None, str | None]:
    """The store URL and audit name: the argument, else the environment, else the user's own config."""
    store = store or os.environ.get("AUDIT_MCP_STORE", "").strip() or None
    audit_name = audit_name or os.environ.get("AUDIT_MCP_AUDIT_NAME", "").strip() or None
    if store is None or audit_name is None:
        try:
            config = load_config(root, config_path)
        except ConfigError:
            config = None  # next_step reports the broken config as its blocked step
        if config is not None:
            store, audit_name = store or config.store, audit_name or config.audit_name
    return store, audit_name


def _require_utf8(path: Path, what: str) -> None:
    """Refuse a path whose name is not UTF-8: prompts, commands, JSON and the store hold it as text."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise ConfigError(
            f"{what} {shown} has a name that is not UTF-8 (shown with \\x escapes); prompts, shell commands and "
            "reports carry it as text, which must be UTF-8. Move or clone the repository to a folder whose path is "
            "UTF-8 and audit it there."
        ) from None


class Workspace:
    """A repository root and everything the audit keeps about it."""

    def __init__(
        self,
        root: Path,
        artifacts_dir: Path | None = None,
        *,
        config_path: Path | None = None,
        clock: Clock | None = None,
        learned: LearnedStore | None = None,
        store: str | None = None,
        audit_name: str | None = None,
    ) -> None:
        self.root = Path(root).expanduser().resolve()
        _require_utf8(self.root, "the repository root")
        if not self.root.is_dir():
            raise ConfigError(f"the repository root {self.root} is not a directory; pass an existing folder")
        # The checkout's own .audit-mcp is read only when this user's audit-mcp made it here (``artifacts``).
        self._artifacts = artifacts.choose(
            self.root, Path(artifacts_dir).expanduser().resolve() if artifacts_dir else None
        )
        self.artifacts_dir = self._artifacts.path
        _require_utf8(self.artifacts_dir, "the artifacts directory")
        self.passed_over = self._artifacts.passed_over
        self._binding: str | None = None
        self.config_path = config_path
        self._clock: Clock = clock or (lambda: datetime.now(UTC))
        # The artifacts directory and its database are created by the first use that writes state, so
        # looking at a folder never audited (status, quota, report) leaves nothing behind in it.
        self.store_url, self._audit_name = store_settings(self.root, config_path, store, audit_name)
        self._store: Store | None = None
        self._store_lock = threading.Lock()
        self.learned = learned or self._learned_store()
        self.probe_transport: httpx.BaseTransport | None = None  # a seam for tests of the provider probe
        self._manifest: tuple[int, list[FileRow]] | None = None  # see hand_over / take_manifest
        self.memo = Memo()  # forecasts between two changes of the store (usecases.memo)
        # Files this process rendered and wrote, with what they looked like then (see ``wrote``).
        self._written: dict[Path, tuple[int, int, int]] = {}
        self._teacher: str | None = None

    @property
    def store(self) -> Store:
        """The audit's database, created (with the artifacts directory) on first use."""
        with self._store_lock:
            if self._store is None:
                self._binding = artifacts.ensure(self._artifacts)
                ignore = self.artifacts_dir / ".gitignore"
                if not ignore.exists():
                    write_atomic(ignore, "# audit-mcp's working files; never audited, never committed.\n*\n")
                self._store = open_store(
                    self.store_url, self.artifacts_dir, lambda: repo_identity(self.root, self._audit_name)
                )
            return self._store

    @property
    def binding(self) -> str:
        """The id sealed into this artifacts folder's binding record (opening the store makes it)."""
        if self._binding is None:
            _ = self.store
        assert self._binding is not None
        return self._binding

    @property
    def run_tag(self) -> str:
        """The tag every run id of this artifacts folder carries (``artifacts.run_tag``)."""
        return artifacts.run_tag(self.binding)

    @property
    def teacher(self) -> str:
        """Whose word this audit's evidence is, to the learned state every audit shares (``scheduling.claims``):
        a digest of the repository's identity (its first commit and origin, or the audit name the user gave),
        else of its path, so that two checkouts of one repository are one teacher, not two."""
        if self._teacher is None:
            try:
                identity = repo_identity(self.root, self._audit_name).key
            except ConfigError:  # no git history: the checkout's path is all that tells it apart
                identity = f"path:{self.root}"
            self._teacher = hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        return self._teacher

    def has_state(self) -> bool:
        """Whether this artifacts directory holds an audit database already."""
        shared = store_kind(self.store_url) == "postgresql"  # a shared store holds it, whoever started it
        return self._store is not None or shared or (self.artifacts_dir / DB_FILENAME).is_file()

    @contextmanager
    def store_if_any(self) -> Iterator[Tx | None]:
        """A read snapshot of the state, or None where no audit was ever started (nothing is created)."""
        if not self.has_state():
            yield None
            return
        with self.store.read() as tx:
            yield tx

    def _learned_store(self) -> LearnedStore:
        """The user's learned state, or the shared store's when the user's config shares it (``[shared]
        learned``, or ``AUDIT_MCP_SHARE_LEARNED``): the limit belongs to the API key the fleet shares."""
        if store_kind(self.store_url) != "postgresql":
            return LearnedStore()  # (without opening the store: SQLite's is created on first use)
        documents = shared_documents(self.store)
        if documents is not None:
            try:
                share = self.config().shared.learned
            except ConfigError:
                share = False  # next_step reports the broken config as its blocked step
            if share:
                return LearnedStore(documents=documents)
        return LearnedStore()

    def hand_over(self, audit_id: int, files: list[FileRow]) -> None:
        """Keep the manifest intake just committed for the planning that follows in the same call, so it is
        not read back from the store (a manifest never changes before its audit is planned)."""
        self._manifest = (audit_id, sorted(files, key=attrgetter("path")))

    def take_manifest(self, audit_id: int) -> list[FileRow] | None:
        """The manifest of ``audit_id`` in path order (as ``Tx.files`` gives it), once, if intake kept it."""
        kept, self._manifest = self._manifest, None
        return kept[1] if kept is not None and kept[0] == audit_id else None

    def now(self) -> str:
        return iso(self._clock())

    def clock(self) -> datetime:
        return self._clock()

    def config(self, *, fresh: bool = False) -> SessionConfig:
        """The session config, with the lenses the current audit was started with (``next-step --lenses``);
        ``fresh``: as a new audit would start, from the config alone."""
        config = load_config(self.root, self.config_path)
        if fresh:
            return config
        with self.store_if_any() as tx:
            audit = tx.current_audit() if tx is not None else None
        chosen = audit.host_caps.get("lenses") if audit is not None else None
        return config.model_copy(update={"lenses": list(chosen)}) if isinstance(chosen, list) and chosen else config

    # files ---------------------------------------------------------------------
    @property
    def step_json_path(self) -> Path:
        return self.artifacts_dir / "steps" / "current-step.json"

    @property
    def step_prompt_path(self) -> Path:
        return self.artifacts_dir / "steps" / "current-prompt.md"

    @property
    def report_md_path(self) -> Path:
        return self.artifacts_dir / "report" / "report.md"

    @property
    def report_json_path(self) -> Path:
        return self.artifacts_dir / "report" / "report.json"

    @property
    def report_sarif_path(self) -> Path:
        return self.artifacts_dir / "report" / "report.sarif"

    def audit_report_path(self, audit_id: int, fmt: str) -> Path:
        """Where a finished audit's report is kept, whatever audits come after it."""
        return self.artifacts_dir / "report" / "audits" / str(audit_id) / f"report.{fmt}"

    @property
    def report_html_path(self) -> Path:
        """The audit page: one self-contained file, written again after every merge."""
        return self.artifacts_dir / "report" / "report.html"

    def run_dir(self, run_id: str) -> Path:
        return self.artifacts_dir / "runs" / run_id

    def plan_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / "dispatch-plan.json"

    def packet_prompt_path(self, run_id: str, packet_id: str) -> Path:
        return self.run_dir(run_id) / "packets" / f"{packet_id}.md"

    def results_dir(self, run_id: str) -> Path:
        return self.run_dir(run_id) / "results"

    def results_path(self, run_id: str, packet_id: str) -> Path:
        """Where a packet's results file goes (the packet prompt names it; merging reads it). The name carries
        a token sealed with the user's key for this folder, run and packet: a file nobody was told to write
        there (one a checkout planted) cannot have it."""
        token = seal("results file", self.binding, run_id, packet_id)[:20]
        return self.results_dir(run_id) / f"{packet_id}.{token}.json"

    def wave_path(self, run_id: str, wave: int) -> Path:
        """One wave's launch list (``plan_pages.wave_doc``), beside the whole plan."""
        return self.run_dir(run_id) / "waves" / f"wave-{wave:02d}.json"

    def write_rendered(self, path: Path, text: str) -> None:
        """Write a file rendered from the store (a prompt) unless it holds ``text`` already, and remember it."""
        data = text.encode("utf-8", "backslashreplace")
        try:
            same = path.read_bytes() == data
        except OSError:
            same = False
        if not same:
            write_atomic(path, text)
        self.note_written(path)

    def note_written(self, path: Path) -> None:
        """Remember ``path`` as this process just wrote it."""
        st = path.stat()
        self._written[path] = (st.st_ino, st.st_size, st.st_mtime_ns)

    def wrote(self, path: Path) -> bool:
        """Whether ``path`` is a file this process wrote and nothing changed since."""
        seen = self._written.get(path)
        if seen is None:
            return False
        try:
            st = path.lstat()
        except OSError:
            return False
        return (st.st_ino, st.st_size, st.st_mtime_ns) == seen

    def read_lines(self, path: str) -> list[str] | None:
        """A repository file's lines (None when it cannot be read inside the root)."""
        try:
            target = resolve_inside(self.root, path)
            return target.read_bytes().decode("utf-8", errors="replace").splitlines()
        except (PathError, OSError):
            return None

    # state ---------------------------------------------------------------------
    @staticmethod
    def superseded_audit(tx: Tx, run: RunRow) -> str | None:
        """Why ``run`` can take no more work because its audit is no longer the current one, or ``None``."""
        current = tx.current_audit()
        if current is None or current.audit_id == run.audit_id:
            return None
        open_run = next((r.run_id for r in tx.runs(current.audit_id, plan=False) if r.state == "open"), None)
        where = f"its open run is {open_run}" if open_run else "call next_step for its current step"
        return (
            f"run {run.run_id} belongs to audit {run.audit_id}, which audit {current.audit_id} has replaced; "
            f"nothing was recorded. Work only on audit {current.audit_id}: {where}."
        )

    def _nothing_here(self) -> str:
        return (
            f"no audit has started in {self.artifacts_dir} (the artifacts directory for {self.root}); call "
            "next_step there first, or pass the --root (or --artifacts-dir) of the audit you mean"
        )

    def require_state(self) -> None:
        """Refuse, saying where it looked, when no audit was ever started here (and create nothing)."""
        if not self.has_state():
            raise NotFoundError(self._nothing_here())

    def require_audit(self, tx: Tx) -> AuditRow:
        audit = tx.current_audit()
        if audit is None:
            raise NotFoundError(self._nothing_here())
        return audit
