"""A store whose files cannot be written: why (the OS's reason), and reading it all the same.

A full disk, a file-size limit, a read-only file system or a folder without write permission
make every write of the embedded store fail, and SQLite's own words for it ("disk I/O
error", "unable to open database file") say neither which nor what to do. ``write_problem``
asks the OS (it writes a small file beside ``cache.db``) and gives its reason;
``UnwritableStoreError`` says it once, naming the store, with the fix that fits (free space,
or make it writable), and never advises deleting the store: its results are intact.

``ReadOnlyCache`` opens such a store for reading (``fxtr jobs``, ``show``, ``export``, the
viewer, a dry run): a diskcache ``Cache`` whose SQLite connection is read-only and whose
opening writes nothing. ``TidyDisk`` removes the value files a batch wrote before it failed
(diskcache leaves them behind a rolled-back transaction, where they would fill the disk a
user just freed). Only ``_diskcache`` uses this module.
"""

from __future__ import annotations

import errno
import functools
import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar
from urllib.parse import quote

import diskcache

from fxtr.store._base import StoreOutage

_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
"""No room: a full disk, a quota, a file-size limit (``ulimit -f``)."""
_LOCKED_OUT = {errno.EROFS, errno.EACCES, errno.EPERM}
"""No right to write: a read-only file system or a folder the user cannot write."""
SQLITE_CACHE_PAGES = 2**10
"""Pages of SQLite's cache per connection to the embedded store (4 MiB), and no memory map:
SQLite's defaults (64 MiB mapped, 32 MiB of pages) stood in the resident memory of every
process that read a large job's records; reads go through the OS's file cache instead."""

_SQLITE_WRITE_FAULTS = ("SQLITE_FULL", "SQLITE_READONLY", "SQLITE_IOERR", "SQLITE_CANTOPEN")
"""SQLite's codes for a write the file system refused (the OS says which refusal it was)."""


class UnwritableStoreError(StoreOutage):
    """The store's files cannot be written (a full disk, a read-only file system).

    Reading the store still works. A job stops at the first result it cannot store, as on a
    store outage: what was stored before is kept, and the job is resumed once the store can
    be written again.
    """

    def __init__(self, path: Any, reason: str, full: bool, limit: bool = False) -> None:
        self.path = path
        """The store's folder."""
        self.reason = reason
        """The OS's reason, with its name: ``No space left on device (ENOSPC)``."""
        self.full = full
        """Whether it lacks room (free space) rather than the right to write (make it so)."""
        self.limit = limit
        """Whether the room it lacks is this process's file-size limit (``ulimit -f``)."""
        super().__init__(f"{self.what} {self.fix}.")

    def __reduce__(self) -> tuple[Any, ...]:  # raised in one process, reported by another
        return type(self), (self.path, self.reason, self.full, self.limit)

    @property
    def what(self) -> str:
        """What happened, naming the store."""
        return f"The store at {self.path} cannot be written: {self.reason}."

    @property
    def remedy(self) -> str:
        """What makes the store writable again, in lower case, without a full stop."""
        if self.limit:
            return "raise the file-size limit (ulimit -f unlimited)"
        if self.full:
            return f"free space on the disk that holds {self.path}"
        return f"make {self.path} writable"

    @property
    def fix(self) -> str:
        """What to do, as a sentence without its full stop."""
        intact = "its results are intact, and reading it works: fxtr jobs, fxtr show"
        if self.full:
            remedy = self.remedy
            return f"{remedy[0].upper()}{remedy[1:]} ({intact}), then run again"
        return (
            f"Make {self.path} writable ({intact}), or point fxtr at another store (store=..., "
            "--fxtr-cache-dir, fxtr --store)"
        )


def _reason(code: int) -> str:
    return f"{os.strerror(code)} ({errno.errorcode.get(code, code)})"


def write_problem(folder: Path) -> tuple[str, bool, bool] | None:
    """Why files cannot be written in ``folder`` (the OS's reason; whether it is room), or None.

    It creates, writes one page to and removes a file there: the OS's answer is the reason.
    """
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent  # a store not made yet: where it would go
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".fxtr-probe-") as handle:
            handle.write(b"\0" * 4096)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        if exc.errno in _FULL or exc.errno in _LOCKED_OUT:
            return _reason(exc.errno), exc.errno in _FULL, exc.errno == errno.EFBIG
        return None
    return None


def refusal(folder: Path) -> tuple[str, bool, bool] | None:
    """Why the OS refuses writes of the store's files in ``folder`` (``write_problem``, a limit)."""
    return write_problem(folder) or _size_limit(folder)


def _size_limit(folder: Path) -> tuple[str, bool, bool] | None:
    """The file-size limit of this process (``ulimit -f``), when the database reached it.

    SQLite calls a write refused so a "disk I/O error"; a small probe file passes the limit.
    """
    try:
        import resource
    except ImportError:  # not on POSIX
        return None
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit == resource.RLIM_INFINITY:
        return None
    sizes = [p.stat().st_size for p in folder.glob("cache.db*") if p.is_file()]
    if not sizes or max(sizes) + 2**16 < limit:
        return None
    reason = f"{_reason(errno.EFBIG)}: this process may write files of at most {limit} bytes"
    return reason + " (ulimit -f)", True, True


def as_unwritable(error: BaseException, path: Path) -> UnwritableStoreError | None:
    """The store error a failed write of the store at ``path`` is, when the OS refused it.

    A write that failed for any other reason (a lock held too long, a value SQLite refuses)
    is None. (A store opened read-only tries no write: ``writes``.)
    """
    if isinstance(error, UnwritableStoreError):
        return error
    if isinstance(error, sqlite3.OperationalError):
        name = str(getattr(error, "sqlite_errorname", ""))
        if not name.startswith(_SQLITE_WRITE_FAULTS):
            return None
        found = refusal(path / "cache")
        if found is not None:
            return UnwritableStoreError(path, *found)
        if name == "SQLITE_FULL":  # SQLite's ENOSPC (a short write), room come back since
            return UnwritableStoreError(path, _reason(errno.ENOSPC), True)
        return None
    if isinstance(error, OSError) and error.errno is not None:
        if error.errno in _FULL or error.errno in _LOCKED_OUT:
            code = error.errno
            return UnwritableStoreError(path, _reason(code), code in _FULL, code == errno.EFBIG)
    return None


_P = ParamSpec("_P")
_R = TypeVar("_R")


def writes(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """A store method that writes: a write the OS refuses is one ``UnwritableStoreError``."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        store: Any = args[0]
        if store.read_only is not None:  # opened read-only: nothing is tried
            raise store.read_only
        try:
            return method(*args, **kwargs)
        except (sqlite3.OperationalError, OSError) as exc:
            found = as_unwritable(exc, store.path)
            if found is None:
                raise
            raise found from None

    return wrapper


class ReadOnlyCache(diskcache.Cache):  # type: ignore[misc]
    """A diskcache ``Cache`` opened for reading only: its opening and its reads write nothing.

    Its SQLite connection is ``mode=ro``; where that cannot open the database (a database in
    WAL mode on a read-only file system, whose ``-shm`` file cannot be made), it is
    ``immutable=1``: nothing else can write a read-only file system. A transaction is a
    plain (deferred) ``BEGIN``: reads see one snapshot. A write raises SQLite's
    ``SQLITE_READONLY``.
    """

    def __init__(self, directory: Path) -> None:  # diskcache's __init__ writes its settings
        self._directory = str(directory)
        self._timeout = 60
        self._local = threading.local()
        self._txn_id: int | None = None
        self._uri: str | None = None
        settings = dict(self._sql("SELECT key, value FROM Settings").fetchall())
        for key, value in settings.items():
            setattr(self, key, value)  # eviction_policy, statistics, ...: what it was written with
        disk = {k[5:]: v for k, v in settings.items() if k.startswith("disk_")}
        self._disk = diskcache.Disk(self._directory, **disk)
        ((self._page_size,),) = self._sql("PRAGMA page_size").fetchall()

    @property
    def _sql(self) -> Callable[..., sqlite3.Cursor]:
        execute = self._con.execute

        def run(statement: str, *args: Any) -> sqlite3.Cursor:
            try:
                return execute(statement, *args)
            except sqlite3.OperationalError as exc:
                # a table of fxtr's that a store written before lacks: an empty one, in
                # memory, so reads find nothing (writes never reach it: ``writes``)
                create = "CREATE TABLE IF NOT EXISTS "
                if statement.startswith(create) and "READONLY" in str(exc.sqlite_errorname):
                    return execute("CREATE TEMP TABLE IF NOT EXISTS " + statement[len(create) :])
                raise

        return run

    @property
    def _con(self) -> sqlite3.Connection:
        con: sqlite3.Connection | None = getattr(self._local, "con", None)
        if con is None or getattr(self._local, "pid", None) != os.getpid():
            con = self._local.con = self._connect()
            self._local.pid = os.getpid()
        return con

    def _connect(self) -> sqlite3.Connection:
        path = quote(os.path.join(self._directory, "cache.db"))
        tries = [self._uri] if self._uri else [f"file:{path}?mode=ro", f"file:{path}?immutable=1"]
        last: sqlite3.Error | None = None
        for uri in tries:
            assert uri is not None
            con = sqlite3.connect(uri, uri=True, timeout=self._timeout, isolation_level=None)
            try:
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.Error as exc:
                con.close()
                last = exc
                continue
            # the page cache as the writable store keeps it (see ``_diskcache._open_cache``)
            con.execute("PRAGMA mmap_size = 0")
            con.execute(f"PRAGMA cache_size = {SQLITE_CACHE_PAGES}")
            self._uri = uri
            return con
        assert last is not None
        raise last

    @contextmanager
    def _transact(self, retry: bool = False, filename: str | None = None) -> Iterator[Any]:
        sql = self._sql
        tid = threading.get_ident()
        begin = self._txn_id != tid
        if begin:
            sql("BEGIN")
            self._txn_id = tid
        try:
            yield sql, lambda name: None
        finally:
            if begin:
                self._txn_id = None
                sql("COMMIT")


_UNKNOWN = diskcache.core.UNKNOWN


class TidyDisk(diskcache.Disk):  # type: ignore[misc]
    """diskcache's ``Disk``, which removes the value files of a transaction that failed.

    Large values live in files beside ``cache.db``, written before the transaction that
    names them commits; when it rolls back (a full disk), nothing names them any more.
    """

    def __init__(self, directory: str, **settings: Any) -> None:
        super().__init__(directory, **settings)
        self._made = threading.local()

    def filename(self, key: Any = _UNKNOWN, value: Any = _UNKNOWN) -> Any:
        name, full_path = super().filename(key, value)
        made: list[str] | None = getattr(self._made, "names", None)
        if made is not None:
            made.append(name)
        return name, full_path

    @contextmanager
    def removed_on_failure(self) -> Iterator[None]:
        """Inside: the value files made are removed if the block raises (after its rollback)."""
        outer = getattr(self._made, "names", None)
        names: list[str] = []
        self._made.names = names
        try:
            yield
        except BaseException:
            for name in names:
                self.remove(name)  # diskcache suppresses the OSError of a file never made
            raise
        finally:
            self._made.names = outer
            if outer is not None:
                outer.extend(names)
