"""File trees as values: ``Files``, manifests, their digests, and the parts this process holds.

A tree is a *manifest*: each path (relative, ``/``-separated) to ``"MODE:DIGEST"``, where MODE
is the octal ``st_mode`` (a regular file, a directory or a symlink, with its permission bits)
and DIGEST the sha256 of the file's bytes (of a symlink's target; empty for a directory). The
manifest's canonical bytes are a part too, and their digest is the tree's digest: two trees
with the same digest are the same byte for byte, modes included.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import stat
import time
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from fxtr.experiment.entities import Entity

FILE = stat.S_IFREG | 0o644
EXECUTABLE = stat.S_IFREG | 0o755
DIRECTORY = stat.S_IFDIR | 0o755

Manifest = dict[str, str]


def digest_of(data: bytes) -> str:
    """The sha256 hex of ``data`` (what the store's ``blob_digest`` computes)."""
    return hashlib.sha256(data).hexdigest()


def entry(mode: int, digest: str) -> str:
    """A manifest value."""
    return f"{mode:o}:{digest}"


def parse(value: str) -> tuple[int, str]:
    """A manifest value's mode and digest."""
    mode, _, digest = value.partition(":")
    return int(mode, 8), digest


def manifest_bytes(manifest: Mapping[str, str]) -> bytes:
    """The canonical bytes of a manifest (sorted keys, no spaces)."""
    return json.dumps(dict(sorted(manifest.items())), separators=(",", ":")).encode()


def tree_digest(manifest: Mapping[str, str]) -> str:
    """The digest of a tree: of its manifest's canonical bytes."""
    return digest_of(manifest_bytes(manifest))


def normal_path(path: str) -> str:
    """A tree path: relative, ``/``-separated, inside the tree.

    Raises:
        ValueError: the path is empty, absolute or climbs out (``..``).
    """
    parts = PurePosixPath(path.replace("\\", "/")).parts
    if not parts or parts[0] == "/" or ".." in parts:
        msg = f"Files path {path!r} must be relative and stay inside the tree (no '..', no '/')."
        raise ValueError(msg)
    return "/".join(p for p in parts if p != ".")


class Parts:
    """The parts (file contents, manifests) this process holds, by digest.

    The launcher's own files are kept for the run (``pin``); parts read from the store or made
    by a call are kept up to ``limit`` bytes, the least recently used dropped first (the store
    has them).
    """

    def __init__(self, limit: int = 512 * 1024 * 1024) -> None:
        self.pinned: dict[str, bytes] = {}
        self.recent: collections.OrderedDict[str, bytes] = collections.OrderedDict()
        self.size = 0
        self.limit = limit

    def get(self, digest: str) -> bytes | None:
        data = self.pinned.get(digest)
        if data is not None:
            return data
        data = self.recent.get(digest)
        if data is not None:
            self.recent.move_to_end(digest)
        return data

    def pin(self, digest: str, data: bytes) -> None:
        self.pinned[digest] = data

    def add(self, digest: str, data: bytes) -> None:
        if digest in self.pinned or digest in self.recent:
            return
        self.recent[digest] = data
        self.size += len(data)
        while self.size > self.limit and self.recent:
            _, dropped = self.recent.popitem(last=False)
            self.size -= len(dropped)

    def missing(self, digests: Iterable[str]) -> list[str]:
        return [d for d in dict.fromkeys(digests) if self.get(d) is None]


PARTS = Parts()


def _with_parents(manifest: dict[str, str]) -> dict[str, str]:
    for path in list(manifest):
        parent = PurePosixPath(path).parent
        while str(parent) != ".":
            manifest.setdefault(str(parent), entry(DIRECTORY, ""))
            parent = parent.parent
    return manifest


class Files(Entity):
    """A file tree by content: each path's mode and digest (the bytes are parts of the store).

    ``Files({"app.py": "print(1)", "run.sh": ("#!/bin/sh", 0o755), "data.bin": b"..."})`` or
    ``Files.from_dir("repo/")``, read by the launcher. Its encoding holds only digests, so a
    large tree costs its manifest in a fingerprint, never its bytes.
    """

    manifest: dict[str, str]
    """Path to ``"MODE:DIGEST"`` (octal mode)."""

    def __init__(self, files: Mapping[str, Any] | None = None, *, manifest: Any = None) -> None:
        if manifest is not None:  # read back from a record
            object.__setattr__(self, "manifest", dict(manifest))
            return
        out: dict[str, str] = {}
        for path, value in (files or {}).items():
            content, mode = value if isinstance(value, tuple) else (value, None)
            if isinstance(content, str):
                content = content.encode()
            if not isinstance(content, bytes):
                msg = (
                    f"Files({path!r}: ...) takes str or bytes (or a (content, mode) pair), got "
                    f"{type(content).__name__}."
                )
                raise TypeError(msg)
            digest = digest_of(content)
            PARTS.pin(digest, content)
            bits = 0o644 if mode is None else int(mode) & 0o7777
            out[normal_path(path)] = entry(stat.S_IFREG | bits, digest)
        object.__setattr__(self, "manifest", _with_parents(out))

    @classmethod
    def from_dir(cls, path: str | os.PathLike[str]) -> Files:
        """The tree under ``path``: files, directories and symlinks, with their modes.

        Raises:
            NotADirectoryError: ``path`` is not a directory.
        """
        root = Path(path)
        if not root.is_dir():
            msg = f"Files.from_dir({str(path)!r}): not a directory."
            raise NotADirectoryError(msg)
        manifest, _ = scan(root, {}, {}, keep=PARTS.pin)
        return cls(manifest=manifest)

    @property
    def digest(self) -> str:
        """The tree's digest."""
        return tree_digest(self.manifest)

    def parts(self) -> dict[str, bytes]:
        """The bytes of every part of this tree this process holds (file contents)."""
        found: dict[str, bytes] = {}
        for value in self.manifest.values():
            _, digest = parse(value)
            data = PARTS.get(digest) if digest else None
            if data is not None:
                found[digest] = data
        return found


Stats = dict[str, tuple[int, ...]]
"""What a scan saw of each path (mode, size, mtime, ctime, inode): unchanged means same bytes."""

RACY_NS = 10_000_000
"""A file changed this close to a scan may change again within the same timestamp tick: its
digest is computed again at the next scan rather than trusted from its stat."""


def scan(
    root: Path,
    known: Mapping[str, str],
    stats: Stats,
    *,
    keep: Any = None,
    sizes: dict[str, int] | None = None,
) -> tuple[dict[str, str], Stats]:
    """The manifest of the tree under ``root``, hashing only what changed since ``stats``.

    ``known`` is the manifest the last scan found, ``stats`` what it saw of each path; a path
    whose stat is the same keeps its digest. ``keep(digest, data)`` receives each file read.
    Sockets, pipes and devices are left out (a tree holds files, directories and symlinks).
    """
    now = time.time_ns()
    manifest: dict[str, str] = {}
    seen: Stats = {}
    pending = [("", str(root))]
    while pending:
        prefix, directory = pending.pop()
        with os.scandir(directory) as it:
            for e in it:
                rel = prefix + e.name
                st = e.stat(follow_symlinks=False)
                mode = st.st_mode
                if stat.S_ISDIR(mode):
                    manifest[rel] = entry(mode & 0o170777, "")
                    pending.append((rel + "/", e.path))
                    continue
                if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                    continue
                key = (mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                if sizes is not None:
                    sizes[rel] = st.st_size
                if stats.get(rel) == key and rel in known:
                    manifest[rel] = known[rel]
                else:
                    data = os.readlink(e.path).encode() if stat.S_ISLNK(mode) else _read(e.path)
                    digest = digest_of(data)
                    if keep is not None:
                        keep(digest, data)
                    manifest[rel] = entry(mode & 0o170777, digest)
                if max(st.st_ctime_ns, st.st_mtime_ns) < now - RACY_NS:
                    seen[rel] = key
    return manifest, seen


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except PermissionError:  # a file its sandbox made unreadable (chmod 000), when not root
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        os.chmod(path, mode | 0o400)
        try:
            with open(path, "rb") as f:
                return f.read()
        finally:
            os.chmod(path, mode)
