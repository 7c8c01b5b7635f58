"""Workspaces: the host directories sandboxes run on, each holding one tree.

A workspace is taken for a call on tree D: an idle one that holds D (the previous call of
the same trajectory left it there), or a new one where D is *materialized* from its parts
(the store's, read once). After the call it is scanned: the new manifest, the layer (what the
call added, changed, deleted) and the bytes of the new files; then it waits, idle, holding
the new tree, for the next call. So a trajectory's calls reuse one directory, a resume at call
n writes tree n once, and no call is ever re-run to rebuild a tree.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from fxtr.sandbox._backend import ROOT
from fxtr.sandbox._files import Manifest, Stats, manifest_bytes, parse, scan, tree_digest

IDLE_LIMIT = 64
"""Idle workspaces kept at most; the least recently used is removed first."""
_UID_BASE = 1_000_000
_UID_SPAN = 1_000_000


class Workspace:
    """A host directory holding one tree, and what its last scan saw."""

    def __init__(self, path: Path, uid: int | None) -> None:
        self.path = path
        self.uid = uid
        self.manifest: Manifest = {}
        self.stats: Stats = {}
        self.sizes: dict[str, int] = {}
        self.digest = tree_digest({})

    @property
    def size(self) -> int:
        """Bytes of the files in the tree."""
        return sum(self.sizes.values())

    def apply(self, target: Mapping[str, str], parts: Mapping[str, bytes]) -> None:
        """Make the directory hold ``target`` (``parts``: the bytes of what must be written)."""
        current = self.manifest
        for path in sorted(set(current) - set(target), reverse=True):
            _remove(self.path / path)
            self.sizes.pop(path, None)
        for path in sorted(target):  # parents before children
            value = target[path]
            if current.get(path) == value:
                continue
            mode, digest = parse(value)
            full = self.path / path
            if stat.S_ISDIR(mode):
                if full.is_symlink() or (full.exists() and not full.is_dir()):
                    _remove(full)
                full.mkdir(exist_ok=True)
                os.chmod(full, stat.S_IMODE(mode))
            else:
                if full.is_dir() and not full.is_symlink():
                    shutil.rmtree(full)
                elif full.is_symlink() or full.exists():
                    full.unlink()
                data = parts[digest]
                if stat.S_ISLNK(mode):
                    os.symlink(data.decode(), full)
                else:
                    full.write_bytes(data)
                    os.chmod(full, stat.S_IMODE(mode))
                self.sizes[path] = len(data)
            if self.uid is not None:
                os.lchown(full, self.uid, self.uid)
        self.manifest = dict(target)
        self.digest = tree_digest(self.manifest)
        self.stats = {}  # what was written is hashed at the next scan

    def capture(self) -> tuple[Manifest, dict[str, bytes]]:
        """Scan the directory: its manifest now, and the bytes of each file read to hash it."""
        read: dict[str, bytes] = {}
        sizes: dict[str, int] = {}
        manifest, self.stats = scan(
            self.path, self.manifest, self.stats, keep=read.__setitem__, sizes=sizes
        )
        self.manifest, self.sizes = manifest, sizes
        self.digest = tree_digest(manifest)
        return manifest, read


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def tree_size(path: Path) -> int:
    """Bytes of the files under ``path`` now (a check while a command runs)."""
    total = 0
    pending = [str(path)]
    while pending:
        with contextlib.suppress(OSError), os.scandir(pending.pop()) as it:
            for e in it:
                with contextlib.suppress(OSError):
                    st = e.stat(follow_symlinks=False)
                    if stat.S_ISDIR(st.st_mode):
                        pending.append(e.path)
                    else:
                        total += st.st_size
    return total


class Pool:
    """The workspaces of this process: idle ones by the digest of the tree they hold."""

    def __init__(self) -> None:
        self.idle: collections.OrderedDict[int, Workspace] = collections.OrderedDict()
        self.root: Path | None = None
        self.materialized = 0
        """Trees written from their parts (a resume writes its tree once)."""

    def _root(self) -> Path:
        if self.root is None or not self.root.is_dir():
            self.root = Path(tempfile.mkdtemp(prefix="fxtr-sandbox-"))
            # the sandbox's uid must reach its own workspace, never list the others
            os.chmod(self.root, 0o711)
            atexit.register(shutil.rmtree, self.root, True)
        return self.root

    def take(self, digest: str) -> Workspace | None:
        """An idle workspace that holds the tree ``digest``, now the caller's."""
        for key, ws in reversed(self.idle.items()):
            if ws.digest == digest:
                del self.idle[key]
                return ws
        return None

    def new(self) -> Workspace:
        """An empty workspace, owned by its own uid when the host runs as root."""
        path = Path(tempfile.mkdtemp(dir=self._root()))
        uid = _UID_BASE + secrets.randbelow(_UID_SPAN) if ROOT else None
        if uid is not None:
            os.chown(path, uid, uid)
        os.chmod(path, 0o755)
        return Workspace(path, uid)

    def give_back(self, ws: Workspace) -> None:
        """Keep ``ws`` idle for the next call on its tree."""
        self.idle[id(ws)] = ws
        while len(self.idle) > IDLE_LIMIT:
            _, old = self.idle.popitem(last=False)
            self.discard(old)

    def discard(self, ws: Workspace) -> None:
        """Remove a workspace whose tree is unknown (a failed call) or not needed."""
        shutil.rmtree(ws.path, ignore_errors=True)

    def clear(self) -> None:
        """Remove every idle workspace."""
        while self.idle:
            self.discard(self.idle.popitem()[1])


POOL = Pool()


def manifest_part(manifest: Mapping[str, str]) -> tuple[str, bytes]:
    """A manifest as a part: its digest (the tree's) and bytes."""
    data = manifest_bytes(manifest)
    return tree_digest(manifest), data
