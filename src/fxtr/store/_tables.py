"""The embedded store's own tables, beside diskcache's ``Cache`` table in ``cache.db``.

``DiskStore`` (``_diskcache``) keeps step-cache entries, records and histories as diskcache
keys; two kinds of data are better served by a table of their own in the same database, on
the cache's own per-thread connection (so ``cache.transact()`` covers them too):

- ``FxtrJobs`` (``JobTable``): job records by job id, so listing jobs reads job records only,
  however many results the cache holds.
- ``FxtrInvocations`` (``InvocationTable``): the latest record of each invocation of a job,
  by job and address, with its status beside it (the unfinished ones indexed), so a resume
  reads the records of one chunk of addresses, or the failed ones, without the rest.
- ``FxtrValues`` (``ValueTable``): step inputs by fingerprint, written a batch at a time in
  one ``executemany``, where a diskcache ``set`` per value cost about five times as much.
- ``FxtrClaims`` (``ClaimTable``): who runs an address now (holder, host, pid, lease end),
  claimed and released a batch at a time with ``executemany``: a 100,000-invocation job
  claims its addresses in a fraction of a second, where a diskcache ``add`` per address
  took seconds.

Only ``_diskcache`` uses these classes.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Iterator
from typing import Any

import diskcache

from fxtr.store._base import keeps, pid_alive

_HOST = socket.gethostname()
_CHUNK = 500
"""Addresses per ``IN (...)`` query (SQLite's default limit on parameters is 999 or more)."""


class _Table:
    def __init__(self, cache: diskcache.Cache) -> None:
        self._cache = cache

    def _sql(self, statement: str, params: tuple[Any, ...] | list[Any] = ()) -> Any:
        # diskcache keeps one connection per thread (the viewer serves from threads)
        return self._cache._sql(statement, params)

    def _many(self, statement: str, rows: Iterable[tuple[Any, ...]]) -> int:
        """Run a statement for every row; how many rows it changed."""
        con = self._cache._con
        before = con.total_changes
        con.executemany(statement, rows)
        return int(con.total_changes - before)


class JobTable(_Table):
    """Job records in their own table of the cache's SQLite database: id -> JSON text."""

    def __init__(self, cache: diskcache.Cache) -> None:
        super().__init__(cache)
        self._sql("CREATE TABLE IF NOT EXISTS FxtrJobs (job_id TEXT PRIMARY KEY, record TEXT)")

    def set(self, job_id: str, text: str) -> None:
        """Write a record."""
        self._sql(
            "INSERT INTO FxtrJobs (job_id, record) VALUES (?, ?) "
            "ON CONFLICT (job_id) DO UPDATE SET record = excluded.record",
            (job_id, text),
        )

    def get(self, job_id: str) -> str | None:
        """A record's text, if any."""
        row = self._sql("SELECT record FROM FxtrJobs WHERE job_id = ?", (job_id,)).fetchone()
        return None if row is None else row[0]  # type: ignore[no-any-return]

    def __contains__(self, job_id: object) -> bool:
        return self.get(str(job_id)) is not None

    def __len__(self) -> int:
        (count,) = self._sql("SELECT COUNT(*) FROM FxtrJobs").fetchone()
        return int(count)

    def items(self) -> list[tuple[str, Any]]:
        """Every (job id, record text), in the order they were first written."""
        return list(self._sql("SELECT job_id, record FROM FxtrJobs ORDER BY rowid").fetchall())

    def iterkeys(self) -> Iterator[str]:
        """Every job id."""
        for job_id, _ in self.items():
            yield job_id


class InvocationTable(_Table):
    """Invocation records: one row per job and address, the latest record (see ``keeps``).

    Besides the record's JSON, a row keeps its status, attempt and whether it was served
    from a cache (``cached``) or ran and succeeded (``ran``), so the rule of ``keeps`` (a
    cache hit of the same attempt does not replace the run) is one upsert, and the rows of
    a job with some status are read from an index.
    """

    def __init__(self, cache: diskcache.Cache) -> None:
        super().__init__(cache)
        self._sql(
            "CREATE TABLE IF NOT EXISTS FxtrInvocations (job_id TEXT NOT NULL, "
            "address TEXT NOT NULL, status TEXT NOT NULL, attempt INTEGER NOT NULL, "
            "cached INTEGER NOT NULL, ran INTEGER NOT NULL, record TEXT NOT NULL, "
            "UNIQUE (job_id, address))"
        )
        # a partial index: only the rows that did not succeed (a few), so writing the
        # succeeded ones costs no second index, and a resume finds the others at once
        self._sql(
            "CREATE INDEX IF NOT EXISTS FxtrInvocationsUnfinished ON FxtrInvocations "
            "(job_id) WHERE status <> 'succeeded'"
        )

    def put(self, job_id: str, records: list[dict[str, Any]], texts: list[str]) -> None:
        """Write a batch's records of one job (inside the caller's transaction).

        ``texts`` are the records' JSON texts, in order (``Batch.record_texts``).
        """
        latest: dict[str, tuple[dict[str, Any], str]] = {}
        for record, text in zip(records, texts, strict=True):
            old = latest.get(record["address"])
            if old is None or not keeps(old[0], record):
                latest[record["address"]] = (record, text)
        self._many(
            "INSERT INTO FxtrInvocations (job_id, address, status, attempt, cached, ran, record) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id, address) DO UPDATE SET "
            "status = excluded.status, attempt = excluded.attempt, cached = excluded.cached, "
            "ran = excluded.ran, record = excluded.record WHERE NOT (excluded.cached "
            "AND FxtrInvocations.ran AND excluded.attempt = FxtrInvocations.attempt)",
            (
                (
                    job_id,
                    address,
                    r.get("status", "skipped"),
                    r.get("attempt", 0),
                    bool(r.get("from_cache")),
                    not r.get("from_cache") and r.get("status") == "succeeded",
                    text,
                )
                for address, (r, text) in latest.items()
            ),
        )

    def has(self, job_id: str) -> bool:
        """Whether the job has any record here."""
        row = self._sql("SELECT 1 FROM FxtrInvocations WHERE job_id = ? LIMIT 1", (job_id,))
        return row.fetchone() is not None

    def all(self, job_id: str) -> dict[str, str]:
        """Every record of a job (JSON text), by address, in the order first written."""
        rows = self._sql(
            "SELECT address, record FROM FxtrInvocations WHERE job_id = ? ORDER BY rowid",
            (job_id,),
        ).fetchall()
        return dict(rows)

    def at(self, job_id: str, addresses: list[str], status: str | None) -> dict[str, str]:
        """The records of a job at some addresses (with that status, if given)."""
        out: dict[str, str] = {}
        extra, params = ("AND status = ? ", (status,)) if status is not None else ("", ())
        for start in range(0, len(addresses), _CHUNK):
            chunk = addresses[start : start + _CHUNK]
            out.update(
                self._sql(
                    "SELECT address, record FROM FxtrInvocations WHERE job_id = ? "
                    f"{extra}AND address IN ({', '.join('?' * len(chunk))})",
                    (job_id, *params, *chunk),
                ).fetchall()
            )
        return out

    def unfinished(self, job_id: str) -> dict[str, str]:
        """The records of a job that did not succeed (failed, skipped, in review), by address."""
        rows = self._sql(
            "SELECT address, record FROM FxtrInvocations WHERE job_id = ? "
            "AND status <> 'succeeded' ORDER BY rowid",
            (job_id,),
        ).fetchall()
        return dict(rows)


class ValueTable(_Table):
    """Step inputs' canonical texts by fingerprint, a batch at a time (``executemany``).

    A fingerprint names its content, so a value is written once and never changed (as on
    PostgreSQL's ``fxtr_values``). Stores written before this table kept values as ``v|``
    keys of the cache; ``DiskStore`` still reads those.
    """

    def __init__(self, cache: diskcache.Cache) -> None:
        super().__init__(cache)
        self._sql(
            "CREATE TABLE IF NOT EXISTS FxtrValues "
            "(fingerprint TEXT PRIMARY KEY, body TEXT NOT NULL)"
        )

    def put(self, values: dict[str, str]) -> None:
        """Write values (inside the caller's transaction); one already there stays."""
        self._many(
            "INSERT OR IGNORE INTO FxtrValues (fingerprint, body) VALUES (?, ?)", values.items()
        )

    def get(self, fingerprint: str) -> str | None:
        """A value's text, if any."""
        row = self._sql(
            "SELECT body FROM FxtrValues WHERE fingerprint = ?", (fingerprint,)
        ).fetchone()
        return None if row is None else row[0]  # type: ignore[no-any-return]

    def __len__(self) -> int:
        (count,) = self._sql("SELECT COUNT(*) FROM FxtrValues").fetchone()
        return int(count)


class ClaimTable(_Table):
    """Claims on addresses: one row per address, with its holder and the end of its lease.

    A claim whose lease ended, or whose holder process on this host is gone, is taken over;
    the holder's own claims are renewed by claiming them again. Callers wrap ``claim`` in
    ``cache.transact()`` so that two processes never both win an address.
    """

    def __init__(self, cache: diskcache.Cache) -> None:
        super().__init__(cache)
        self._sql(
            "CREATE TABLE IF NOT EXISTS FxtrClaims (address TEXT PRIMARY KEY, "
            "holder TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, expires REAL NOT NULL)"
        )

    def claim(self, addresses: list[str], holder: str, lease: float) -> dict[str, str | None]:
        """Claim addresses for ``holder`` (inside the caller's transaction).

        Returns:
            Per address, ``None`` when this holder has it, or the other holder's name.
        """
        addresses = list(dict.fromkeys(addresses))
        if not addresses:
            return {}
        now, pid = time.time(), os.getpid()
        changed = self._many(
            "INSERT INTO FxtrClaims (address, holder, host, pid, expires) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (address) DO UPDATE SET holder = excluded.holder, "
            "host = excluded.host, pid = excluded.pid, expires = excluded.expires "
            "WHERE FxtrClaims.expires < ? OR FxtrClaims.holder = excluded.holder",
            ((a, holder, _HOST, pid, now + lease, now) for a in addresses),
        )
        if changed == len(addresses):  # every row inserted or taken: the common case
            return dict.fromkeys(addresses)
        out: dict[str, str | None] = {}
        dead: list[str] = []
        for address, other, host, other_pid in self.holders(addresses):
            if other == holder:
                out[address] = None
            elif host == _HOST and not pid_alive(other_pid):
                dead.append(address)
            else:
                out[address] = other
        if dead:
            self._many(
                "UPDATE FxtrClaims SET holder = ?, host = ?, pid = ?, expires = ? "
                "WHERE address = ?",
                ((holder, _HOST, pid, now + lease, a) for a in dead),
            )
            out.update(dict.fromkeys(dead))
        return {a: out.get(a) for a in addresses}

    def holders(self, addresses: list[str]) -> list[tuple[str, str, str, int]]:
        """``(address, holder, host, pid)`` of the claimed ones among ``addresses``."""
        rows: list[tuple[str, str, str, int]] = []
        for start in range(0, len(addresses), _CHUNK):
            chunk = addresses[start : start + _CHUNK]
            rows += self._sql(
                "SELECT address, holder, host, pid FROM FxtrClaims "
                f"WHERE address IN ({', '.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
        return rows

    def renew(self, addresses: Iterable[str], lease: float) -> None:
        """Extend the leases of claims this process holds."""
        expires = time.time() + lease
        self._many(
            "UPDATE FxtrClaims SET expires = ? WHERE address = ?",
            ((expires, a) for a in addresses),
        )

    def release(self, addresses: Iterable[str]) -> None:
        """Give up claims (inside the caller's transaction, with the results they guarded)."""
        self._many("DELETE FROM FxtrClaims WHERE address = ?", ((a,) for a in addresses))

    def live(self) -> int:
        """How many claims hold now (their lease has not ended)."""
        (count,) = self._sql(
            "SELECT COUNT(*) FROM FxtrClaims WHERE expires >= ?", (time.time(),)
        ).fetchone()
        return int(count)
