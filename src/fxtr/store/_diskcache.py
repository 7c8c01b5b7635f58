"""The embedded store on diskcache: safe for several processes, one SQLite transaction a batch.

Keys (all ``str``, values JSON text):

- ``e|ADDRESS``: the step-cache entry at an address (fingerprint, step, version, source hash,
  input fingerprints, result).
- ``h|ADDRESS``: entries an overwrite or a version bump replaced, oldest first.
- ``c|ADDRESS``: a claim on an address (holder, host, pid), with a lease as diskcache expiry.
- ``n|ID``: a stored entity's canonical text.
- ``j|JOB``: a job's record; ``i|JOB|SEQ``: a chunk of its invocation records, appended in
  completion order (a later record of an address replaces an earlier one);
  ``s|JOB``: the number of chunks; ``o|JOB|ATTEMPT``: the operations each workflow
  invocation scheduled; ``w|JOB|ATTEMPT``: the workflow invocations of an attempt.
- ``v|FINGERPRINT``: the canonical text of a step input (records keep fingerprints).
- ``x|JOB|ATTEMPT|ADDRESS``: the record of an invocation that failed in that attempt.
- ``l|KEY``: the last job launched for a key (the plugin's per-eval resume pointer).
- ``tc|TASK`` and ``tn|TASK|SEQ``: a ``fxtr.tracing.Client`` task graph, node by node.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import diskcache

_HOST = socket.gethostname()
_OPEN: dict[str, Any] = {}


@atexit.register
def _close_all() -> None:
    """Close the stores this process opened (connections are not left to the collector)."""
    for store in list(_OPEN.values()):
        with contextlib.suppress(Exception):
            store.close()


def is_url(location: Any) -> bool:
    """Whether a store location is a database URL rather than a directory."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def open_store(location: Any) -> Any:
    """The store at a directory (diskcache) or a ``postgresql://`` URL.

    Opened once per process and location; a store object is returned as it is.
    """
    if hasattr(location, "write") and hasattr(location, "get_entries"):
        return location
    if is_url(location):
        key = str(location)
        store = _OPEN.get(key)
        if store is None or store.closed:
            from fxtr.store._postgres import PostgresStore

            store = _OPEN[key] = PostgresStore(key)
        return store
    key = os.path.abspath(location)
    store = _OPEN.get(key)
    if store is None or store.closed:
        store = _OPEN[key] = DiskStore(key)
    return store


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class CacheEntry:
    """A step-cache entry: fingerprint, version, usage, result text, and the rest (lazily).

    Stored as five lines so a cache hit reads the fingerprint and the result without
    parsing the metadata: fingerprint, version, usage JSON (or empty), result, metadata JSON.
    """

    __slots__ = ("_meta", "_meta_text", "fingerprint", "result", "usage", "version")

    def __init__(
        self,
        fingerprint: str,
        version: str | None,
        result: str,
        usage: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        meta_text: str | None = None,
    ) -> None:
        self.fingerprint = fingerprint
        self.version = version
        self.result = result
        """Canonical text of the result."""
        self.usage = usage
        """Model calls the step made when it ran: calls, tokens, dollars (None: none)."""
        self._meta = meta
        self._meta_text = meta_text

    @property
    def meta(self) -> dict[str, Any]:
        """Step name, source hash, input fingerprints, job id, creation time."""
        if self._meta is None:
            self._meta = json.loads(self._meta_text or "{}")
        return self._meta

    def to_text(self) -> str:
        """The stored form."""
        meta = self._meta_text if self._meta is None else json.dumps(self._meta)
        usage = json.dumps(self.usage) if self.usage else ""
        return f"{self.fingerprint}\n{self.version or ''}\n{usage}\n{self.result}\n{meta or '{}'}"

    @classmethod
    def from_text(cls, text: str) -> CacheEntry:
        """Parse the stored form."""
        fp, version, usage, result, meta = text.split("\n", 4)
        return cls(fp, version or None, result, json.loads(usage) if usage else None, None, meta)

    def as_dict(self) -> dict[str, Any]:
        """Everything, as one JSON-able dict (history and ``fxtr cache``)."""
        return {
            "fingerprint": self.fingerprint,
            "version": self.version,
            "result": self.result,
            "usage": self.usage,
            **self.meta,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CacheEntry:
        """Rebuild from ``as_dict``."""
        rest = {
            k: v for k, v in data.items() if k not in ("fingerprint", "version", "result", "usage")
        }
        return cls(
            data["fingerprint"], data.get("version"), data["result"], data.get("usage"), rest
        )


def keeps(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether an invocation's record stands against a later one of the same attempt.

    Processes that join one job (pytest-xdist workers) each record every invocation; the one
    that ran it and the ones that then found it in the cache write the same attempt. The run
    is what happened; a later cache hit of the same attempt does not replace it.
    """
    return (
        bool(new.get("from_cache"))
        and not old.get("from_cache")
        and old.get("status") == "succeeded"
        and new.get("attempt") == old.get("attempt")
    )


@dataclasses.dataclass(slots=True)
class Batch:
    """Writes gathered while the event loop runs, committed together in one transaction."""

    entries: dict[str, str] = dataclasses.field(default_factory=dict)
    """New cache entries by address (``CacheEntry.to_text``)."""
    replaced: dict[str, str] = dataclasses.field(default_factory=dict)
    """Entries moved to the history before being replaced, by address."""
    released: list[str] = dataclasses.field(default_factory=list)
    """Addresses whose claims this process gives up."""
    entities: dict[str, str] = dataclasses.field(default_factory=dict)
    """Entity texts by id."""
    invocations: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    """Invocation records per job id."""
    values: dict[str, str] = dataclasses.field(default_factory=dict)
    """Canonical texts of step inputs by fingerprint (what an invocation received)."""
    failures: dict[str, str] = dataclasses.field(default_factory=dict)
    """Failed invocation records by ``JOB|ATTEMPT|ADDRESS``, for processes that joined the
    attempt and wait on the address."""

    def __bool__(self) -> bool:
        return bool(
            self.entries
            or self.replaced
            or self.released
            or self.entities
            or self.invocations
            or self.values
            or self.failures
        )


class DiskStore:
    """The project store in one directory, over one diskcache ``Cache``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.cache = diskcache.Cache(
            str(self.path / "cache"),
            timeout=60,
            eviction_policy="none",  # results are never evicted behind a user's back
            size_limit=2**62,
            statistics=False,
            tag_index=False,
        )
        self.closed = False
        from fxtr.experiment._hermetic import register_store

        register_store(self.path)

    def close(self) -> None:
        """Close the underlying SQLite connections."""
        self.cache.close()
        self.closed = True

    def __repr__(self) -> str:
        return f"DiskStore({str(self.path)!r})"

    # step cache -----------------------------------------------------------------------

    def get_entries(self, addresses: Iterable[str]) -> dict[str, CacheEntry]:
        """The cache entries that exist among ``addresses``, read in bulk."""
        keys = ["e|" + address for address in addresses]
        parse = CacheEntry.from_text
        return {key[2:]: parse(text) for key, text in self._get_many(keys).items()}

    def _get_many(self, keys: list[str]) -> dict[str, str]:
        """Values of many str keys: one SELECT per 500 keys instead of one per key.

        It runs the query ``Cache.get`` runs, over diskcache's own table and ``Disk.fetch``
        (a step's inputs are read together, so a cached rerun is bound by this); should
        diskcache ever change those internals, it falls back to ``Cache.get`` per key.
        """
        out: dict[str, str] = {}
        try:
            sql = self.cache._sql
            fetch = self.cache._disk.fetch
            now = time.time()
            with self.cache.transact():
                for start in range(0, len(keys), 500):
                    chunk = keys[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    rows = sql(
                        "SELECT key, mode, filename, value FROM Cache WHERE key IN "
                        f"({marks}) AND raw = 1 AND (expire_time IS NULL OR expire_time > ?)",
                        (*chunk, now),
                    ).fetchall()
                    for key, mode, filename, value in rows:
                        out[key] = fetch(mode, filename, value, False)
            return out
        except (AttributeError, TypeError, sqlite3.OperationalError):
            out.clear()
        get = self.cache.get
        with self.cache.transact():
            for key in keys:
                text = get(key)
                if text is not None:
                    out[key] = text
        return out

    def get_entry(self, address: str) -> CacheEntry | None:
        """The cache entry at one address, if any."""
        text = self.cache.get("e|" + address)
        return None if text is None else CacheEntry.from_text(text)

    def history(self, address: str) -> list[dict[str, Any]]:
        """Entries that replaced ones at ``address`` pushed out, oldest first."""
        text = self.cache.get("h|" + address)
        return [] if text is None else json.loads(text)

    def restore(self, address: str, index: int = -1) -> dict[str, Any]:
        """Put a history entry back at ``address``; the current entry goes to the history.

        Raises:
            KeyError: the address has no history (or no entry at ``index``).
        """
        with self.cache.transact():
            history = self.history(address)
            if not history:
                msg = f"No history at address {address!r} in {self.path}; nothing to restore."
                raise KeyError(msg)
            try:
                entry = history.pop(index)
            except IndexError:
                msg = f"Address {address!r} has {len(history)} history entries; no {index}."
                raise KeyError(msg) from None
            current = self.cache.get("e|" + address)
            if current is not None:
                history.append(CacheEntry.from_text(current).as_dict())
            self.cache.set("h|" + address, json.dumps(history))
            self.cache.set("e|" + address, CacheEntry.from_dict(entry).to_text())
        return entry

    def iter_entries(self) -> Iterator[tuple[str, CacheEntry]]:
        """Every cache entry, with its address."""
        for key in self.cache.iterkeys():
            if isinstance(key, str) and key.startswith("e|"):
                text = self.cache.get(key)
                if text is not None:
                    yield key[2:], CacheEntry.from_text(text)

    # claims ---------------------------------------------------------------------------

    def claim(self, addresses: list[str], holder: str, lease: float) -> dict[str, str | None]:
        """Claim addresses for ``holder``, in one transaction.

        A claim whose lease expired, or whose holder process on this host is gone, is taken
        over.

        Returns:
            Per address, ``None`` when this holder has it, or the other holder's name.
        """
        value = json.dumps({"holder": holder, "host": _HOST, "pid": os.getpid()})
        out: dict[str, str | None] = {}
        cache = self.cache
        with cache.transact():
            for address in addresses:
                key = "c|" + address
                if cache.add(key, value, expire=lease):
                    out[address] = None
                    continue
                current = cache.get(key)
                if current is None:  # expired between add and get
                    cache.set(key, value, expire=lease)
                    out[address] = None
                    continue
                info = json.loads(current)
                if info["holder"] == holder or (
                    info["host"] == _HOST and not _pid_alive(info["pid"])
                ):
                    cache.set(key, value, expire=lease)
                    out[address] = None
                else:
                    out[address] = info["holder"]
        return out

    def renew(self, addresses: Iterable[str], lease: float) -> None:
        """Extend the leases of claims this process holds."""
        with self.cache.transact():
            for address in addresses:
                self.cache.touch("c|" + address, expire=lease)

    def release(self, addresses: Iterable[str]) -> None:
        """Give up claims."""
        with self.cache.transact():
            for address in addresses:
                self.cache.delete("c|" + address)

    # entities -------------------------------------------------------------------------

    def get_entity(self, entity_id: str) -> str | None:
        """A stored entity's canonical text."""
        text: str | None = self.cache.get("n|" + entity_id)
        return text

    # job records ----------------------------------------------------------------------

    def put_job(self, record: dict[str, Any]) -> None:
        """Write a job's record (root workflow, inputs, commit, attempts)."""
        self.cache.set("j|" + record["job_id"], json.dumps(record))

    def get_job(self, job_id: str) -> dict[str, Any]:
        """A job's record.

        Raises:
            KeyError: the store has no such job.
        """
        text = self.cache.get("j|" + job_id)
        if text is None:
            msg = f"No job {job_id!r} in the store at {self.path}. `fxtr jobs` lists the jobs."
            raise KeyError(msg)
        record: dict[str, Any] = json.loads(text)
        return record

    def has_job(self, job_id: str) -> bool:
        """Whether the store holds a job."""
        return ("j|" + job_id) in self.cache

    def iter_jobs(self) -> Iterator[dict[str, Any]]:
        """Every job record."""
        for key in self.cache.iterkeys():
            if isinstance(key, str) and key.startswith("j|"):
                text = self.cache.get(key)
                if text is not None:
                    yield json.loads(text)

    def job_invocations(self, job_id: str) -> dict[str, dict[str, Any]]:
        """The latest record of each invocation of a job, by address (see ``keeps``)."""
        count = self.cache.get("s|" + job_id, 0)
        out: dict[str, dict[str, Any]] = {}
        with self.cache.transact():
            for seq in range(count):
                text = self.cache.get(f"i|{job_id}|{seq}")
                if text is None:
                    continue
                for record in json.loads(text):
                    old = out.get(record["address"])
                    if old is None or not keeps(old, record):
                        out[record["address"]] = record
        return out

    def put_ops(self, job_id: str, attempt: int, ops: dict[str, list[dict[str, Any]]]) -> None:
        """Record the operations each workflow invocation scheduled in an attempt."""
        self.cache.set(f"o|{job_id}|{attempt}", json.dumps(ops))

    def get_ops(self, job_id: str, attempt: int) -> dict[str, list[dict[str, Any]]] | None:
        """The operations recorded for an attempt, if it got that far."""
        text = self.cache.get(f"o|{job_id}|{attempt}")
        return None if text is None else json.loads(text)

    def put_workflows(self, job_id: str, attempt: int, workflows: list[dict[str, Any]]) -> None:
        """Record the workflow invocations of an attempt (status, error, logs, notices)."""
        self.cache.set(f"w|{job_id}|{attempt}", json.dumps(workflows))

    def get_workflows(self, job_id: str, attempt: int) -> list[dict[str, Any]]:
        """The workflow invocations recorded for an attempt."""
        text = self.cache.get(f"w|{job_id}|{attempt}")
        return [] if text is None else json.loads(text)

    def get_failures(self, keys: list[str]) -> dict[str, str]:
        """Failed invocations' records by ``JOB|ATTEMPT|ADDRESS``, where some were written."""
        return {k[2:]: v for k, v in self._get_many(["x|" + key for key in keys]).items()}

    def get_value(self, fingerprint: str) -> str | None:
        """The canonical text of a step input, by its fingerprint."""
        text: str | None = self.cache.get("v|" + fingerprint)
        return text

    def iter_tasks(self) -> Iterator[str]:
        """Ids of the tracing tasks in the store."""
        for key in self.cache.iterkeys():
            if isinstance(key, str) and key.startswith("tc|"):
                yield key[3:]

    def volume(self) -> dict[str, Any]:
        """Entry counts by kind and the size on disk."""
        names = {
            "e": "cache entries",
            "h": "histories",
            "c": "claims",
            "n": "entities",
            "j": "jobs",
            "v": "input values",
            "tc": "tracing tasks",
        }
        counts = dict.fromkeys(names.values(), 0)
        for key in self.cache.iterkeys():
            if isinstance(key, str):
                kind = names.get(key.split("|", 1)[0])
                if kind:
                    counts[kind] += 1
        return {"path": str(self.path), "bytes": self.cache.volume(), **counts}

    def clear_cache(self) -> int:
        """Remove every step-cache entry and its history (job records stay); how many."""
        removed = 0
        with self.cache.transact():
            for key in list(self.cache.iterkeys()):
                if isinstance(key, str) and key.startswith(("e|", "h|")):
                    removed += key.startswith("e|")
                    self.cache.delete(key)
        return removed

    def next_trace_seq(self, task_id: str) -> int:
        """A new position in a task graph's node list."""
        return int(self.cache.incr("tc|" + task_id)) - 1

    def put_trace_node(self, task_id: str, seq: int, node: dict[str, Any]) -> None:
        """Write (or rewrite) one node of a task graph."""
        self.cache.set(f"tn|{task_id}|{seq}", json.dumps(node))

    def get_trace_nodes(self, task_id: str) -> list[dict[str, Any]]:
        """A task graph's nodes in creation order (empty when the store lacks the task)."""
        count = self.cache.get("tc|" + task_id, 0)
        nodes = []
        with self.cache.transact():
            for seq in range(count):
                text = self.cache.get(f"tn|{task_id}|{seq}")
                if text is not None:
                    nodes.append(json.loads(text))
        return nodes

    def set_last_job(self, key: str, job_id: str) -> None:
        """Remember the last job launched for a key."""
        self.cache.set("l|" + key, job_id)

    def get_last_job(self, key: str) -> str | None:
        """The last job launched for a key."""
        value: str | None = self.cache.get("l|" + key)
        return value

    # batched writes -------------------------------------------------------------------

    def write(self, batch: Batch) -> None:
        """Commit a batch: entries (history kept), entities, records, claim releases."""
        cache = self.cache
        with cache.transact():
            for address, old in batch.replaced.items():
                text = cache.get("h|" + address)
                history = [] if text is None else json.loads(text)
                history.append(CacheEntry.from_text(old).as_dict())
                cache.set("h|" + address, json.dumps(history))
            for address, text in batch.entries.items():
                cache.set("e|" + address, text)
            for entity_id, text in batch.entities.items():
                cache.set("n|" + entity_id, text)
            for fp, text in batch.values.items():
                cache.set("v|" + fp, text)
            for key, text in batch.failures.items():
                cache.set("x|" + key, text)
            for job_id, records in batch.invocations.items():
                seq = cache.incr("s|" + job_id) - 1
                cache.set(f"i|{job_id}|{seq}", json.dumps(records))
            for address in batch.released:
                cache.delete("c|" + address)

    def wait_hint(self) -> float:
        """Seconds to wait before polling a claim held elsewhere again."""
        return 0.05 + (time.monotonic() % 0.05)
