"""What intake asks git about a repository: the files it lists, HEAD and whether the tree is dirty, and
the linguist marks of the repository's ``.gitattributes``."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from audit_mcp.core.config import CONFIG_FILENAME
from audit_mcp.engine import attributes
from audit_mcp.engine.attributes import Attributes
from audit_mcp.engine.git import GitReader, paths_of


def git_paths(git: GitReader) -> list[str]:
    listing = git.require(
        "list the files of the repository with git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"
    )
    return sorted(set(paths_of(listing)))


def git_snapshot(git: GitReader, artifacts_rel: str | None) -> tuple[str | None, bool]:
    head = git.run("rev-parse", "--verify", "--quiet", "HEAD")
    head_sha = head.stdout.decode().strip() if head is not None and head.returncode == 0 else None
    status = git.run("status", "--porcelain", "-z", "--ignore-submodules=all")
    dirty = False
    if status is not None and status.returncode == 0:
        for entry in status.stdout.split(b"\0"):
            path = entry[3:].decode(errors="replace")
            if not entry or (artifacts_rel and path.startswith(artifacts_rel)):
                continue
            if path == CONFIG_FILENAME:
                continue
            dirty = True
            break
    return head_sha, dirty


def linguist_attributes(git: GitReader, paths: list[str]) -> dict[str, Attributes]:
    """The linguist marks the repository's ``.gitattributes`` give ``paths`` (none outside a work tree)."""
    marks: dict[str, Attributes] = {}
    for batch in attributes.batches(paths):
        output = git.require("read the .gitattributes of the repository", *attributes.check_attr_args(), *batch)
        marks.update(attributes.parse(output))
    return marks


def has_attribute_files(git: GitReader, top: Path, root: Path, paths: list[str]) -> bool:
    """Whether any attributes file can apply to ``paths``: a ``.gitattributes`` in a directory holding one
    of them or above it (up to the work tree's top), or the repository's ``info/attributes``. Without one,
    every mark is unspecified and ``git check-attr`` over every path is skipped (the system and global
    attribute files are off in the hardened environment)."""
    dirs = {""}
    for path in paths:
        cut = path.rfind("/")  # posixpath.dirname, with a cheaper common case (this runs for every file)
        folder = path[:cut] if cut > 0 and path[cut - 1] != "/" else posixpath.dirname(path)
        while folder not in dirs:
            dirs.add(folder)
            folder = posixpath.dirname(folder)
    above = [p for p in root.parents if p == top or top in p.parents]  # between the root and the top
    if any(
        os.path.lexists(f"{root}{os.sep}{d}{os.sep}.gitattributes" if d else f"{root}{os.sep}.gitattributes")
        for d in dirs
    ):
        return True
    if any(os.path.lexists(folder / ".gitattributes") for folder in above):
        return True
    proc = git.run("rev-parse", "--git-path", "info/attributes")
    if proc is None or proc.returncode != 0:
        return True  # cannot tell: ask git for every path
    named = proc.stdout.decode("utf-8", errors="surrogateescape").strip()
    return os.path.lexists(root / named)  # an absolute path stays absolute


def repository_attributes(root: Path, paths: list[str]) -> dict[str, Attributes]:
    """``linguist_attributes`` for a root that may or may not be a git work tree."""
    real_root = root.resolve()
    git = GitReader(real_root)
    top = git.work_tree() if paths else None
    if top is None or not has_attribute_files(git, top, real_root, paths):
        return {}
    return linguist_attributes(git, paths)
