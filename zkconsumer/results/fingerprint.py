"""The fingerprint of the source a result depends on, so a record can tell whether the code it measured has changed.

A file counts by what it *does*: a Python file by its syntax tree without docstrings (comments never reach the
tree), so rewording a docstring or a comment does not make every result older than its code; any other source
file by its bytes. The same fingerprint is computed from a working tree (what a benchmark imported) and from any
commit (``git ls-tree`` and ``git cat-file``: what a record written before fingerprints measured, and which commit
first changed the code since). Each file's hash is cached by git's blob id, so walking a run of commits parses only
the files that changed.
"""

from __future__ import annotations

import ast
import hashlib
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

#: files that are source: what a change of would change a measurement (compiled caches and the like are not)
SOURCE_SUFFIXES = (".py", ".toml", ".scala", ".java", ".json", ".properties", ".cfg")
#: how a fingerprint is computed (a record keeps it: one computed otherwise is not compared)
KIND = "ast-v1"

_by_blob: dict[str, str] = {}


def blob_sha(data: bytes) -> str:
    """Git's object id of a file's contents (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


def content_hash(path: str, data: bytes, blob: str | None = None) -> str:
    """What a file does, as a hash (see the module's docstring); cached by its blob id."""
    blob = blob or blob_sha(data)
    if blob not in _by_blob:
        text = data
        if path.endswith(".py"):
            try:
                text = ast.dump(_strip_docstrings(ast.parse(data))).encode()
            except (SyntaxError, ValueError):
                pass  # not Python this interpreter reads: its bytes, then
        _by_blob[blob] = hashlib.sha256(text).hexdigest()
    return _by_blob[blob]


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
        for p in files:
            name = p.relative_to(root).as_posix()
            if _is_source(name):
                entries.append((name, content_hash(name, p.read_bytes())))
    return _digest(entries)


def git(root: Path, *args: str, stdin: bytes | None = None) -> bytes | None:
    """A git command's output in ``root`` (None: no git, or it failed)."""
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, input=stdin, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _contents(root: Path, blobs: list[str]) -> dict[str, bytes]:
    """The contents of git objects, by id, read in one ``git cat-file --batch``."""
    out = git(root, "cat-file", "--batch", stdin="".join(b + "\n" for b in blobs).encode())
    found: dict[str, bytes] = {}
    at = 0
    while out is not None and at < len(out):
        end = out.index(b"\n", at)
        sha, _kind, size = out[at:end].decode().split()
        found[sha] = out[end + 1:end + 1 + int(size)]
        at = end + 1 + int(size) + 1
    return found


def at_commit(root: Path, commit: str, paths: Sequence[str]) -> str | None:
    """The fingerprint of ``paths`` as they were at ``commit`` (None: git, or the commit, is not here)."""
    out = git(root, "ls-tree", "-r", commit, "--", *paths)
    if out is None:
        return None
    listed = []
    for line in out.decode().splitlines():
        meta, _, path = line.partition("\t")
        if _is_source(path):
            listed.append((path, meta.split()[2]))
    missing = [blob for _, blob in listed if blob not in _by_blob]
    contents = _contents(root, missing) if missing else {}
    return _digest((path, content_hash(path, contents.get(blob, b""), blob) if blob not in _by_blob
                    else _by_blob[blob]) for path, blob in listed)


def first_change_after(root: Path, commit: str, paths: Sequence[str], measured: str) -> str | None:
    """The first commit after ``commit`` whose ``paths`` no longer have the ``measured`` fingerprint (None: git
    cannot tell, or no commit changed them: the change is not committed yet)."""
    out = git(root, "log", "--format=%h", "--reverse", f"{commit}..HEAD", "--", *paths)
    for later in (out or b"").decode().split():
        if at_commit(root, later, paths) != measured:
            return later
    return None
