"""The fingerprint of the source a result depends on: git's blob hash of each file under a set of paths.

Git's blob hashes make a fingerprint computable from a working tree (what a benchmark measures, committed or not)
and from any commit (``git ls-tree``: what a record written before fingerprints existed measured), and equal when
the files are; the check needs no git, only naming the commit that changed the code does.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

#: files that are source: what a change of would change a measurement (compiled caches and the like are not)
SOURCE_SUFFIXES = (".py", ".toml", ".scala", ".java", ".json", ".properties", ".cfg")


def blob_sha(data: bytes) -> str:
    """Git's object id of a file's contents (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _digest(entries: Iterable[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for path, sha in sorted(entries):
        h.update(f"{path} {sha}\n".encode())
    return h.hexdigest()[:16]


def _is_source(path: str) -> bool:
    return path.endswith(SOURCE_SUFFIXES) and "__pycache__" not in path


def of_tree(root: Path, paths: Sequence[str]) -> str:
    """The fingerprint of ``paths`` (files or folders, relative to ``root``) as they are on disk now."""
    entries = []
    for rel in paths:
        base = root / rel
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        entries += [(p.relative_to(root).as_posix(), blob_sha(p.read_bytes()))
                    for p in files if _is_source(p.as_posix())]
    return _digest(entries)


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def at_commit(root: Path, commit: str, paths: Sequence[str]) -> str | None:
    """The fingerprint of ``paths`` as they were at ``commit`` (None: git, or the commit, is not here)."""
    out = _git(root, "ls-tree", "-r", commit, "--", *paths)
    if out is None:
        return None
    entries = []
    for line in out.splitlines():
        meta, _, path = line.partition("\t")
        if _is_source(path):
            entries.append((path, meta.split()[2]))
    return _digest(entries)


def first_change_after(root: Path, commit: str, paths: Sequence[str]) -> str | None:
    """The first commit after ``commit`` that changed one of ``paths`` (None: none, or git cannot tell)."""
    out = _git(root, "log", "--format=%h", "--reverse", f"{commit}..HEAD", "--", *paths)
    lines = (out or "").split()
    return lines[0] if lines else None
