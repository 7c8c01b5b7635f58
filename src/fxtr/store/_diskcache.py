"""The embedded store on diskcache: safe for several processes, one SQLite transaction a batch.

One diskcache ``Cache`` in ``cache/`` holds everything a batch writes together; the job
records and the claims live in tables of their own in the same SQLite database
(``FxtrJobs``, ``FxtrClaims``: see ``_tables``), so listing jobs reads job records only,
however many results the cache holds, claims are taken a batch at a time, and opening the
store opens one database. Keys of the cache (all ``str``,
values JSON text):

- ``e|ADDRESS``: the current step-cache entry at an address (fingerprint, step, version,
  source hash, input fingerprints, result): a hit on it reads this key only.
- ``q|ADDRESS|FINGERPRINT``: the address's other kept entries with that fingerprint (a JSON
  list of entry texts, one per key: usually one), so finding one among N reads one key;
  ``k|ADDRESS``: their order, ``[[key, fingerprint], ...]``, the one current longest ago
  first (the next to go past ``keep``, and ``history``'s order).
- ``h|ADDRESS``: written by fxtr before entries were kept per fingerprint (the replaced
  entries, oldest first); moved into ``q|``/``k|`` when the store is opened.
- ``n|ID``: a stored entity's canonical text.
- ``o|JOB|ATTEMPT``: the operations each workflow invocation scheduled;
  ``w|JOB|ATTEMPT``: the workflow invocations of an attempt. Invocation records live in
  ``FxtrInvocations`` (one row per job and address, status indexed); stores written before
  it kept them as ``i|JOB|SEQ`` chunks in completion order (``s|JOB``: how many), which are
  still read, the table's rows standing over them.
- ``v|FINGERPRINT``: the canonical text of a step input (records keep fingerprints).
- ``x|JOB|ATTEMPT|ADDRESS``: the record of an invocation that failed in that attempt.
- ``b|DIGEST``: a content-addressed part (``Batch.blobs``), its bytes; a large one is a
  file of diskcache's own (values past its ``disk_min_file_size``).
- ``l|KEY``: the last job launched for a key (the plugin's per-eval resume pointer).
- ``tc|TASK`` and ``tn|TASK|SEQ``: a ``fxtr.tracing.Client`` task graph, node by node.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import diskcache

from fxtr.store._base import Batch, CacheEntry, StoreError, entry_key, intact_blobs
from fxtr.store._diskcache_jobs import DiskRecords
from fxtr.store._tables import ClaimTable, InvocationTable, JobTable, ValueTable
from fxtr.store._unwritable import (
    SQLITE_CACHE_PAGES,
    ReadOnlyCache,
    TidyDisk,
    UnwritableStoreError,
    refusal,
    writes,
)

_KINDS = {
    "e": "cache entries",
    "k": "addresses with older entries",
    "n": "entities",
    "b": "parts",
    "v": "input values",
    "tc": "tracing tasks",
}


def _open_cache(directory: Path) -> diskcache.Cache:
    return diskcache.Cache(
        str(directory),
        timeout=60,
        disk=TidyDisk,  # a batch that fails leaves no value file behind
        eviction_policy="none",  # results are never evicted behind a user's back
        cull_limit=0,  # nothing expires (claims live in FxtrClaims): no culling query per write
        size_limit=2**62,
        statistics=False,
        tag_index=False,
        sqlite_mmap_size=0,  # see SQLITE_CACHE_PAGES
        sqlite_cache_size=SQLITE_CACHE_PAGES,
    )


def _texts(text: Any) -> list[Any]:
    """A stored JSON list; an empty one when it is missing or cannot be read.

    A cut entry of the kept ones is damaged: skipped, never a crash that blocks its address.
    """
    if not isinstance(text, str):
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return value if isinstance(value, list) else []


class DiskStore(DiskRecords):
    """The project store in one directory, over one diskcache ``Cache``.

    This module holds the step cache (current and kept entries), the claims and entities;
    ``DiskRecords`` (``_diskcache_jobs``) the job records and task graphs.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.read_only: UnwritableStoreError | None = None
        """Why the store was opened for reading only (its files cannot be written), or None."""
        try:
            try:
                self.cache = _open_cache(self.path / "cache")
            except (sqlite3.DatabaseError, OSError) as exc:
                self.cache = self._open_read_only(exc)
            self.jobs = JobTable(self.cache)
            """Job records by job id, apart from the cache entries so that listing them is cheap."""
            self.claims = ClaimTable(self.cache)
            self.records = InvocationTable(self.cache)
            self.values = ValueTable(self.cache)
        except sqlite3.DatabaseError as exc:  # a garbled cache.db: one clear error
            msg = (
                f"{self.path / 'cache' / 'cache.db'} is not a readable fxtr store ({exc}). "
                f"Move {self.path} aside (or delete it to start afresh), or point fxtr at "
                "another store (store=..., --fxtr-cache-dir, fxtr --store)."
            )
            raise StoreError(msg) from None
        self.closed = False
        if self.read_only is None:
            self._move_job_records()
            self._move_histories()
        from fxtr.experiment._hermetic import register_store

        register_store(self.path)

    def _open_read_only(self, error: Exception) -> diskcache.Cache:
        """The store opened for reading, when the OS refuses to write it; else ``error``.

        Raises:
            UnwritableStoreError: the store cannot be written and holds nothing to read yet.
        """
        found = refusal(self.path / "cache")
        if found is None:
            raise error
        if not (self.path / "cache" / "cache.db").is_file():
            raise UnwritableStoreError(self.path, *found) from None
        cache = ReadOnlyCache(self.path / "cache")
        self.read_only = UnwritableStoreError(self.path, *found)
        return cache

    def close(self) -> None:
        """Close the underlying SQLite connections."""
        self.cache.close()
        self.closed = True

    def _keys(self, prefix: str) -> list[str]:
        """The keys of ``cache/`` with a prefix, read from its key index (not a full walk).

        Should diskcache's table ever change, it falls back to walking every key.
        """
        try:
            rows = self.cache._sql(
                "SELECT key FROM Cache WHERE key >= ? AND key < ? AND raw = 1 ORDER BY key",
                (prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)),
            ).fetchall()
            return [key for (key,) in rows if isinstance(key, str)]
        except (AttributeError, TypeError, sqlite3.OperationalError):
            return [k for k in self.cache.iterkeys() if isinstance(k, str) and k.startswith(prefix)]

    def _count(self, prefix: str) -> int:
        try:
            (count,) = self.cache._sql(
                "SELECT COUNT(*) FROM Cache WHERE key >= ? AND key < ? AND raw = 1",
                (prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)),
            ).fetchone()
            return int(count)
        except (AttributeError, TypeError, sqlite3.OperationalError):
            return len(self._keys(prefix))

    def _move_histories(self) -> None:
        """Stores written before entries were kept per fingerprint had ``h|ADDRESS`` lists.

        Each replaced entry becomes a kept entry of its address (the current one stays
        current; of several with one key the later is kept), oldest first as they were.
        """
        keys = self._keys("h|")
        if not keys:
            return
        with self.cache.transact():
            for key in keys:
                address = key[2:]
                text = self.cache.get(key)
                current = self.cache.get("e|" + address)
                if text is not None and current is not None:
                    cur = CacheEntry.from_text(current)
                    index = self._index(address)
                    for data in json.loads(text):
                        try:
                            entry = CacheEntry.from_dict(data)
                        except (KeyError, TypeError, AttributeError):
                            continue  # not an entry: nothing to serve
                        if entry.key != cur.key:
                            self._keep(address, entry.to_text(), entry.key, index)
                    self._set_index(address, index)
                self.cache.delete(key)

    def __repr__(self) -> str:
        return f"DiskStore({str(self.path)!r})"

    # step cache -----------------------------------------------------------------------

    def get_entries(self, addresses: Iterable[str]) -> dict[str, CacheEntry]:
        """The cache entries that exist among ``addresses``, read in bulk."""
        keys = ["e|" + address for address in addresses]
        parse = CacheEntry.from_text
        return {key[2:]: parse(text) for key, text in self._get_many(keys).items()}

    def _get_many(self, keys: list[str], raw: bool = False) -> dict[str, Any]:
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
                        try:
                            out[key] = fetch(mode, filename, value, False)
                        except OSError:  # its value file is gone: a damaged entry
                            if not raw:
                                out[key] = ""
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
        """The current cache entry at one address, if any."""
        text = self.cache.get("e|" + address)
        return None if text is None else CacheEntry.from_text(text)

    def get_kept(self, wanted: dict[str, str]) -> dict[str, list[CacheEntry]]:
        """Kept (not current) entries with a fingerprint, per address: ``{address: fp}``.

        One key per address, however many entries it keeps.
        """
        keys = {f"q|{address}|{fp}": address for address, fp in wanted.items()}
        texts = self._get_many(list(keys))
        return {keys[k]: [CacheEntry.from_text(t) for t in _texts(v)] for k, v in texts.items()}

    def history(self, address: str) -> list[dict[str, Any]]:
        """The kept entries at ``address`` other than the current one, current longest ago first."""
        with self.cache.transact():
            return [entry.as_dict() for _, entry in self._readable(address)]

    @writes
    def restore(self, address: str, index: int = -1) -> dict[str, Any]:
        """Make a kept entry current again (``history``'s numbering); the current one is kept.

        Raises:
            KeyError: the address has no history (or no entry at ``index``).
        """
        with self.cache.transact():
            order = self._readable(address)
            if not order:
                msg = f"No history at address {address!r} in {self.path}; nothing to restore."
                raise KeyError(msg)
            try:
                key, _ = order[index]
            except IndexError:
                msg = f"Address {address!r} has {len(order)} history entries; no {index}."
                raise KeyError(msg) from None
            text = self._promote(address, key, len(self._index(address)) + 1)
            assert text is not None
        return CacheEntry.from_text(text).as_dict()

    def iter_entries(self) -> Iterator[tuple[str, CacheEntry]]:
        """Every current cache entry, with its address (in address order)."""
        keys = self._keys("e|")
        for start in range(0, len(keys), 500):
            texts = self._get_many(keys[start : start + 500])
            for key in keys[start : start + 500]:
                text = texts.get(key)
                if text is not None:
                    yield key[2:], CacheEntry.from_text(text)

    # kept entries (inside the caller's transaction) -----------------------------------

    def _readable(self, address: str) -> list[tuple[str, CacheEntry]]:
        """The kept entries that can be read, current longest ago first.

        Damaged ones are skipped: history and restore number only these.
        """
        out = []
        for key, fp in self._index(address):
            entry = self._kept_entry(address, key, fp)
            if entry is not None and not entry.damaged:
                out.append((key, entry))
        return out

    def _index(self, address: str) -> list[list[str]]:
        """The address's kept entries as ``[key, fingerprint]`` pairs; [] when unreadable."""
        index = _texts(self.cache.get("k|" + address))
        return [p for p in index if isinstance(p, list) and len(p) == 2]

    def _set_index(self, address: str, index: list[list[str]]) -> None:
        if index:
            self.cache.set("k|" + address, json.dumps(index))
        else:
            self.cache.delete("k|" + address)

    def _group(self, address: str, fp: str) -> list[str]:
        return [t for t in _texts(self.cache.get(f"q|{address}|{fp}")) if isinstance(t, str)]

    def _set_group(self, address: str, fp: str, texts: list[str]) -> None:
        if texts:
            self.cache.set(f"q|{address}|{fp}", json.dumps(texts))
        else:
            self.cache.delete(f"q|{address}|{fp}")

    def _kept_entry(self, address: str, key: str, fp: str) -> CacheEntry | None:
        for text in self._group(address, fp):
            entry = CacheEntry.from_text(text)
            if entry.damaged or entry.key == key:
                return entry
        return None

    def _keep(self, address: str, text: str, key: str, index: list[list[str]]) -> None:
        """Keep an entry that stops being current (the newest of the kept ones)."""
        fp = key.partition("+")[0]
        self._unkeep(address, key, fp, index)
        group = self._group(address, fp)
        group.append(text)
        self._set_group(address, fp, group)
        index.append([key, fp])

    def _unkeep(self, address: str, key: str, fp: str, index: list[list[str]]) -> str | None:
        """Take an entry out of the kept ones; its text, if it was kept."""
        if [key, fp] not in index:
            return None
        index.remove([key, fp])
        found = None
        rest = []
        for text in self._group(address, fp):
            if found is None and _key_of(text) == key:
                found = text
            else:
                rest.append(text)
        self._set_group(address, fp, rest)
        return found

    def _evict(self, address: str, index: list[list[str]], keep: int) -> None:
        """Past ``keep`` entries (the current one included), the ones current longest ago go."""
        while index and len(index) + 1 > keep:
            key, fp = index[0]
            self._unkeep(address, key, fp, index)

    def _install(self, address: str, text: str, current: str | None, keep: int) -> None:
        """A new entry becomes current; the one it displaces is kept."""
        index: list[list[str]] = []
        if current is not None:
            new_key = _key_of(text)
            index = self._index(address)
            old = CacheEntry.from_text(current)
            if not old.damaged and old.key != new_key:
                self._keep(address, current, old.key, index)
            self._unkeep(address, new_key, new_key.partition("+")[0], index)
            self._evict(address, index, keep)
            self._set_index(address, index)
        self.cache.set("e|" + address, text)

    def _promote(self, address: str, key: str, keep: int) -> str | None:
        """A kept entry becomes current again (its text); None when it is no longer kept."""
        current = self.cache.get("e|" + address)
        if current is not None and _key_of(current) == key:
            return None
        index = self._index(address)
        text = self._unkeep(address, key, key.partition("+")[0], index)
        if text is None:
            return None
        if current is not None:
            old = CacheEntry.from_text(current)
            if not old.damaged:
                self._keep(address, current, old.key, index)
        self.cache.set("e|" + address, text)
        self._evict(address, index, keep)
        self._set_index(address, index)
        return text

    # claims ---------------------------------------------------------------------------

    @writes
    def claim(self, addresses: list[str], holder: str, lease: float) -> dict[str, str | None]:
        """Claim addresses for ``holder``, in one transaction (``ClaimTable.claim``).

        A claim whose lease expired, or whose holder process on this host is gone, is taken
        over.

        Returns:
            Per address, ``None`` when this holder has it, or the other holder's name.
        """
        with self.cache.transact():
            return self.claims.claim(addresses, holder, lease)

    @writes
    def renew(self, addresses: Iterable[str], lease: float) -> None:
        """Extend the leases of claims this process holds."""
        with self.cache.transact():
            self.claims.renew(addresses, lease)

    @writes
    def release(self, addresses: Iterable[str]) -> None:
        """Give up claims."""
        with self.cache.transact():
            self.claims.release(addresses)

    # entities and input values --------------------------------------------------------

    def get_entity(self, entity_id: str) -> str | None:
        """A stored entity's canonical text."""
        text: str | None = self.cache.get("n|" + entity_id)
        return text

    def get_value(self, fingerprint: str) -> str | None:
        """The canonical text of a step input, by its fingerprint."""
        text = self.values.get(fingerprint)
        if text is None:  # a store written before FxtrValues kept it as a cache key
            text = self.cache.get("v|" + fingerprint)
        return text

    # content-addressed parts ----------------------------------------------------------

    def get_blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        """The parts present among ``digests``; a damaged one is absent.

        A part whose bytes do not hash to its digest is removed, so that the next write of
        it stores it again.
        """
        keys = ["b|" + d for d in dict.fromkeys(digests)]
        found = ((k[2:], v) for k, v in self._get_many(keys, raw=True).items())
        good, damaged = intact_blobs((d, v) for d, v in found if isinstance(v, bytes))
        if damaged and self.read_only is None:
            with self.cache.transact():
                for digest in damaged:
                    self.cache.delete("b|" + digest)
        return good

    def has_blobs(self, digests: Iterable[str]) -> set[str]:
        """Which of ``digests`` the store holds (read on the key index: no part is read)."""
        return {k[2:] for k in self._present(["b|" + d for d in dict.fromkeys(digests)])}

    def _present(self, keys: list[str]) -> set[str]:
        out: set[str] = set()
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                rows = self.cache._sql(
                    f"SELECT key FROM Cache WHERE key IN ({','.join('?' * len(chunk))}) "
                    "AND raw = 1",
                    chunk,
                ).fetchall()
                out.update(key for (key,) in rows)
        except (AttributeError, TypeError, sqlite3.OperationalError):
            out = {k for k in keys if k in self.cache}
        return out

    # the whole store ------------------------------------------------------------------

    def volume(self) -> dict[str, Any]:
        """Entry counts by kind and the size on disk (counted on the key index)."""
        counts = {name: self._count(prefix + "|") for prefix, name in _KINDS.items()}
        counts["input values"] += len(self.values)
        counts["claims"] = self.claims.live()
        counts["jobs"] = len(self.jobs)
        return {"path": str(self.path), "bytes": self.cache.volume(), **counts}

    @writes
    def clear_cache(self) -> int:
        """Remove every step-cache entry, current or kept (job records stay); how many."""
        entries = self._keys("e|")
        with self.cache.transact():
            for key in entries + self._keys("k|") + self._keys("q|"):
                self.cache.delete(key)
        return len(entries)

    # batched writes -------------------------------------------------------------------

    def write(self, batch: Batch) -> None:
        """Commit a batch: entries (the ones they displace kept), entities, records, releases.

        A batch that fails leaves no value file behind (removed once the OS said why it failed).
        """
        with self.cache.disk.removed_on_failure():
            self._write(batch)

    @writes
    def _write(self, batch: Batch) -> None:
        cache = self.cache
        keep = max(1, batch.keep)
        with cache.transact():
            if batch.entries:
                # read in the transaction: what another process made current is kept too
                currents = self._get_many(["e|" + a for a in batch.entries])
                for address, text in batch.entries.items():
                    self._install(address, text, currents.get("e|" + address), keep)
            for address, key in batch.current.items():
                if address not in batch.entries:
                    self._promote(address, key, keep)
            if batch.blobs:  # before the entries that name them (one transaction)
                have = self._present(["b|" + d for d in batch.blobs])
                for digest, data in batch.blobs.items():
                    if "b|" + digest not in have:
                        cache.set("b|" + digest, data)
            for entity_id, text in batch.entities.items():
                cache.set("n|" + entity_id, text)
            if batch.values:
                self.values.put(batch.values)
            for key, text in batch.failures.items():
                cache.set("x|" + key, text)
            for job_id, records in batch.invocations.items():
                self.records.put(job_id, records, batch.record_texts(job_id))
            if batch.released:
                self.claims.release(batch.released)

    def wait_hint(self) -> float:
        """Seconds to wait before polling a claim held elsewhere again."""
        return 0.05 + (time.monotonic() % 0.05)


def _key_of(text: str) -> str:
    """An entry's key from its stored text, reading its fingerprint line only."""
    lines = text.split("\n", 2)
    line = lines[1] if text.startswith("#") and len(lines) > 1 else lines[0]
    fp, _, code = line.partition(" ")
    try:
        return entry_key(fp, json.loads(code) if code else None)
    except ValueError:
        return ""
