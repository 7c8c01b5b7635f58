"""``PostgresStore``: one step cache, one set of claims and one record for a team and its CI.

Selected by a URL (``postgresql://user@host/db``; credentials from the URL or the standard
``PG*`` environment variables, never written anywhere). The schema is created and migrated
by fxtr (a version table; a newer schema than this fxtr knows is a clear error). Table names
are fixed and every value is a bound parameter. A claim is one atomic statement (insert, or
take over an expired lease, returning the winners); a batch (entries, history, entities,
input values, invocation records, claim releases) is one transaction, durable on commit.
A process holds one connection, used one statement (or transaction) at a time.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

try:
    import psycopg
except ImportError as exc:  # pragma: no cover - exercised without the extra
    msg = (
        "The PostgreSQL store needs psycopg, which is not installed. Install it with "
        "`pip install 'pytest-fxtr[postgres]'`."
    )
    raise ImportError(msg) from exc

from fxtr.experiment.errors import FxtrError
from fxtr.store import _postgres_cache as entries
from fxtr.store._base import Batch, CacheEntry, intact_blobs
from fxtr.store._base import pid_alive as _pid_alive
from fxtr.store._postgres_cache import BUCKETS, COLUMNS, K_COLUMNS
from fxtr.store._postgres_jobs import PostgresRecords

SCHEMA_VERSION = 2
"""1: one entry per address and a history table; 2: entries kept per fingerprint."""
_HOST = socket.gethostname()

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS fxtr_schema (version integer NOT NULL)",
    """CREATE TABLE IF NOT EXISTS fxtr_entries (
        address text PRIMARY KEY, fingerprint text NOT NULL, version text, usage text,
        result text NOT NULL, meta text NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS fxtr_history (
        id bigserial PRIMARY KEY, address text NOT NULL, entry text NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS fxtr_history_address ON fxtr_history (address, id)",
    """CREATE TABLE IF NOT EXISTS fxtr_claims (
        address text PRIMARY KEY, holder text NOT NULL, host text NOT NULL,
        pid integer NOT NULL, expires double precision NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS fxtr_entities (id text PRIMARY KEY, body text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS fxtr_values (fingerprint text PRIMARY KEY, body text NOT NULL)",
    """CREATE TABLE IF NOT EXISTS fxtr_jobs (
        job_id text PRIMARY KEY, record text NOT NULL, created_at double precision)""",
    """CREATE TABLE IF NOT EXISTS fxtr_invocations (
        job_id text NOT NULL, address text NOT NULL, record text NOT NULL,
        attempt integer NOT NULL, ran boolean NOT NULL, PRIMARY KEY (job_id, address))""",
    """CREATE TABLE IF NOT EXISTS fxtr_attempts (
        job_id text NOT NULL, attempt integer NOT NULL, kind text NOT NULL, body text NOT NULL,
        PRIMARY KEY (job_id, attempt, kind))""",
    "CREATE TABLE IF NOT EXISTS fxtr_last (key text PRIMARY KEY, job_id text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS fxtr_failures (key text PRIMARY KEY, record text NOT NULL)",
    """CREATE TABLE IF NOT EXISTS fxtr_trace (
        task_id text NOT NULL, seq integer NOT NULL, node text NOT NULL,
        PRIMARY KEY (task_id, seq))""",
    "CREATE TABLE IF NOT EXISTS fxtr_trace_seq (task_id text PRIMARY KEY, n integer NOT NULL)",
    # the checksum of the result (``checksum_of``); NULL in rows written before it: trusted
    "ALTER TABLE fxtr_entries ADD COLUMN IF NOT EXISTS checksum text",
    # schema 2: the code reached at run time (``CacheEntry.code``), and the kept entries
    "ALTER TABLE fxtr_entries ADD COLUMN IF NOT EXISTS code text",
    """CREATE TABLE IF NOT EXISTS fxtr_kept (
        address text NOT NULL, key text NOT NULL, fingerprint text NOT NULL, version text,
        usage text, result text NOT NULL, meta text NOT NULL, checksum text, code text,
        seq bigserial, PRIMARY KEY (address, key))""",
    "CREATE INDEX IF NOT EXISTS fxtr_kept_fingerprint ON fxtr_kept (address, fingerprint)",
    # the status of each invocation record, indexed (NULL in rows written before it: the
    # record says): a resume reads the failed ones, or one chunk of addresses
    "ALTER TABLE fxtr_invocations ADD COLUMN IF NOT EXISTS status text",
    "CREATE INDEX IF NOT EXISTS fxtr_invocations_status ON fxtr_invocations (job_id, status)",
    # content-addressed parts (``Batch.blobs``): sha256 hex of the bytes -> the bytes
    "CREATE TABLE IF NOT EXISTS fxtr_blobs (digest text PRIMARY KEY, body bytea NOT NULL)",
]


def redacted(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


class SchemaError(FxtrError):
    """The database holds a newer fxtr schema than this fxtr knows."""


class _Locked:
    """One connection shared by the threads of a process.

    One statement or transaction at a time: the engine, the plugin and the viewer's threads
    all use the store.
    """

    def __init__(self, conn: Any, lock: threading.RLock) -> None:
        self.conn = conn
        self.lock = lock

    @property
    def closed(self) -> bool:
        return bool(self.conn.closed)

    def execute(self, sql: str, params: Any = ()) -> Any:
        with self.lock:  # results are fetched client-side by execute
            return self.conn.execute(sql, params)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with self.lock, self.conn.transaction():
            yield

    def cursor(self) -> Any:
        return self.conn.cursor()


class PostgresStore(PostgresRecords):
    """The project store in a PostgreSQL database.

    This module holds the connection, the schema, the step cache (with ``_postgres_cache``)
    and the claims; ``PostgresRecords`` (``_postgres_jobs``) the job records and task graphs.
    """

    def __init__(self, url: str) -> None:
        self._url = url
        self.path = redacted(url)
        self.closed = False
        self._lock = threading.RLock()
        self._db: _Locked | None = None
        try:
            self._migrate()
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return f"PostgresStore({self.path!r})"

    # the connection --------------------------------------------------------------------

    def _conn(self) -> _Locked:
        if self._db is None or self._db.closed:
            self._db = _Locked(psycopg.connect(self._url, autocommit=True), self._lock)
        return self._db

    def close(self) -> None:
        """Close the connection."""
        if self._db is not None:
            self._db.conn.close()
        self.closed = True

    def _migrate(self) -> None:
        conn = self._conn()
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(7305841)")  # one migrator at a time
            for statement in _SCHEMA:
                conn.execute(statement)
            row = conn.execute("SELECT max(version) FROM fxtr_schema").fetchone()
            current = row[0] if row else None
            if current is None:
                conn.execute("INSERT INTO fxtr_schema (version) VALUES (%s)", (SCHEMA_VERSION,))
            elif current < SCHEMA_VERSION:
                entries.move_history(conn)
                conn.execute("UPDATE fxtr_schema SET version = %s", (SCHEMA_VERSION,))
            elif current > SCHEMA_VERSION:
                msg = (
                    f"The database at {self.path} holds fxtr schema {current}, newer than this "
                    f"fxtr understands ({SCHEMA_VERSION}). Upgrade fxtr."
                )
                raise SchemaError(msg)

    def _one(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        row = self._conn().execute(sql, params).fetchone()
        return None if row is None else row[0]

    # step cache -----------------------------------------------------------------------

    @staticmethod
    def _entry(row: tuple[Any, ...]) -> CacheEntry:
        return CacheEntry.from_columns(*row)

    def get_entries(self, addresses: Iterable[str]) -> dict[str, CacheEntry]:
        """The current cache entries that exist among ``addresses``, in one query."""
        rows = (
            self._conn()
            .execute(
                f"SELECT address, {COLUMNS} FROM fxtr_entries WHERE address = ANY(%s)",
                (list(addresses),),
            )
            .fetchall()
        )
        return {row[0]: self._entry(row[1:]) for row in rows}

    def get_entry(self, address: str) -> CacheEntry | None:
        """The current cache entry at one address, if any."""
        return self.get_entries([address]).get(address)

    def get_kept(self, wanted: dict[str, str]) -> dict[str, list[CacheEntry]]:
        """Kept (not current) entries with a fingerprint, per address: ``{address: fp}``."""
        if not wanted:
            return {}
        rows = (
            self._conn()
            .execute(
                f"SELECT k.address, {K_COLUMNS} FROM fxtr_kept k "
                "JOIN unnest(%s::text[], %s::text[]) AS w(address, fp) "
                "ON k.address = w.address AND k.fingerprint = w.fp",
                (list(wanted), list(wanted.values())),
            )
            .fetchall()
        )
        out: dict[str, list[CacheEntry]] = {}
        for row in rows:
            out.setdefault(row[0], []).append(self._entry(row[1:]))
        return out

    def history(self, address: str) -> list[dict[str, Any]]:
        """The kept entries at ``address`` but the current one, current longest ago first.

        Entries that cannot be read (damaged) are skipped.
        """
        rows = (
            self._conn()
            .execute(f"SELECT {COLUMNS} FROM fxtr_kept WHERE address = %s ORDER BY seq", (address,))
            .fetchall()
        )
        kept = [self._entry(row) for row in rows]
        return [entry.as_dict() for entry in kept if not entry.damaged]

    def restore(self, address: str, index: int = -1) -> dict[str, Any]:
        """Make a kept entry current again (``history``'s numbering); the current one is kept.

        Raises:
            KeyError: the address has no history (or no entry at ``index``).
        """
        conn = self._conn()
        with conn.transaction():
            entries.lock_buckets(conn, [address])
            rows = conn.execute(
                f"SELECT key, {COLUMNS} FROM fxtr_kept WHERE address = %s ORDER BY seq",
                (address,),
            ).fetchall()
            total = len(rows)
            keys = [r[0] for r in rows if not self._entry(r[1:]).damaged]  # as history numbers
            if not keys:
                msg = f"No history at address {address!r} in {self.path}; nothing to restore."
                raise KeyError(msg)
            try:
                key = keys[index]
            except IndexError:
                msg = f"Address {address!r} has {len(keys)} history entries; no {index}."
                raise KeyError(msg) from None
            entry = entries.make_current(conn, {address: key}, total + 1)[address]
        return entry.as_dict()

    def iter_entries(self) -> Iterator[tuple[str, CacheEntry]]:
        """Every cache entry, with its address."""
        rows = self._conn().execute(f"SELECT address, {COLUMNS} FROM fxtr_entries").fetchall()
        for row in rows:
            yield row[0], self._entry(row[1:])

    def clear_cache(self) -> int:
        """Remove every cache entry, current or kept (job records stay); how many."""
        conn = self._conn()
        with conn.transaction():
            conn.execute(
                "SELECT count(pg_advisory_xact_lock(7305842, b)) FROM generate_series(0, %s) b",
                (BUCKETS - 1,),
            )
            count = conn.execute("DELETE FROM fxtr_entries").rowcount
            conn.execute("DELETE FROM fxtr_kept")
            conn.execute("DELETE FROM fxtr_history")
        return int(count)

    def volume(self) -> dict[str, Any]:
        """Entry counts by kind and the size of fxtr's tables."""
        tables = {
            "cache entries": "fxtr_entries",
            "kept entries": "fxtr_kept",
            "claims": "fxtr_claims",
            "entities": "fxtr_entities",
            "jobs": "fxtr_jobs",
            "input values": "fxtr_values",
            "parts": "fxtr_blobs",
            "tracing tasks": "fxtr_trace_seq",
        }
        counts = {
            name: self._one(f"SELECT count(*) FROM {table}")  # fixed table names
            for name, table in tables.items()
        }
        size = self._one(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "WHERE c.relname LIKE 'fxtr\\_%%' AND c.relkind = 'r'"
        )
        return {"path": self.path, "bytes": int(size or 0), **counts}

    # claims ---------------------------------------------------------------------------

    def claim(self, addresses: list[str], holder: str, lease: float) -> dict[str, str | None]:
        """Claim addresses in one statement; expired leases and dead holders are taken over.

        Returns:
            Per address, ``None`` when this holder has it, or the other holder's name.
        """
        if not addresses:
            return {}
        now = time.time()
        conn = self._conn()
        won = {
            row[0]
            for row in conn.execute(
                "INSERT INTO fxtr_claims (address, holder, host, pid, expires) "
                "SELECT a, %s, %s, %s, %s FROM unnest(%s::text[]) AS a "
                "ON CONFLICT (address) DO UPDATE SET holder = EXCLUDED.holder, "
                "host = EXCLUDED.host, pid = EXCLUDED.pid, expires = EXCLUDED.expires "
                "WHERE fxtr_claims.expires < %s OR fxtr_claims.holder = EXCLUDED.holder "
                "RETURNING address",
                (holder, _HOST, os.getpid(), now + lease, addresses, now),
            ).fetchall()
        }
        out: dict[str, str | None] = dict.fromkeys(won)
        lost = [a for a in addresses if a not in won]
        if lost:
            rows = conn.execute(
                "SELECT address, holder, host, pid FROM fxtr_claims WHERE address = ANY(%s)",
                (lost,),
            ).fetchall()
            for address, other, host, pid in rows:
                if host == _HOST and not _pid_alive(pid):
                    taken = conn.execute(
                        "UPDATE fxtr_claims SET holder = %s, pid = %s, expires = %s "
                        "WHERE address = %s AND holder = %s RETURNING address",
                        (holder, os.getpid(), now + lease, address, other),
                    ).fetchone()
                    out[address] = None if taken else other
                else:
                    out[address] = other
            for address in lost:
                if address not in out:  # released between the insert and the select
                    out[address] = self.claim([address], holder, lease)[address]
        return out

    def renew(self, addresses: Iterable[str], lease: float) -> None:
        """Extend the leases of claims this process holds."""
        self._conn().execute(
            "UPDATE fxtr_claims SET expires = %s WHERE address = ANY(%s)",
            (time.time() + lease, list(addresses)),
        )

    def release(self, addresses: Iterable[str]) -> None:
        """Give up claims."""
        self._conn().execute("DELETE FROM fxtr_claims WHERE address = ANY(%s)", (list(addresses),))

    def wait_hint(self) -> float:
        """Seconds to wait before polling a claim held elsewhere again."""
        return 0.1

    # entities and values ------------------------------------------------------------

    def get_entity(self, entity_id: str) -> str | None:
        """A stored entity's canonical text."""
        value: str | None = self._one("SELECT body FROM fxtr_entities WHERE id = %s", (entity_id,))
        return value

    def get_value(self, fingerprint: str) -> str | None:
        """The canonical text of a step input, by its fingerprint."""
        value: str | None = self._one(
            "SELECT body FROM fxtr_values WHERE fingerprint = %s", (fingerprint,)
        )
        return value

    # content-addressed parts ----------------------------------------------------------

    def get_blobs(self, digests: Iterable[str]) -> dict[str, bytes]:
        """The parts present among ``digests``; a damaged one is absent.

        A part whose bytes do not hash to its digest is removed, so that the next write of
        it stores it again.
        """
        wanted = list(dict.fromkeys(digests))
        if not wanted:
            return {}
        conn = self._conn()
        rows = conn.execute(
            "SELECT digest, body FROM fxtr_blobs WHERE digest = ANY(%s)", (wanted,)
        ).fetchall()
        good, damaged = intact_blobs((d, bytes(b)) for d, b in rows)
        if damaged:
            conn.execute("DELETE FROM fxtr_blobs WHERE digest = ANY(%s)", (damaged,))
        return good

    def has_blobs(self, digests: Iterable[str]) -> set[str]:
        """Which of ``digests`` the store holds (no part is read)."""
        wanted = list(dict.fromkeys(digests))
        if not wanted:
            return set()
        rows = (
            self._conn()
            .execute("SELECT digest FROM fxtr_blobs WHERE digest = ANY(%s)", (wanted,))
            .fetchall()
        )
        return {row[0] for row in rows}

    # batched writes -------------------------------------------------------------------

    def write(self, batch: Batch) -> None:
        """Commit a batch in one transaction."""
        conn = self._conn()
        with conn.transaction(), conn.cursor() as cur:
            if batch.blobs:  # the parts first, so an entry never names a part not stored
                have = {
                    row[0]
                    for row in conn.execute(
                        "SELECT digest FROM fxtr_blobs WHERE digest = ANY(%s)", (list(batch.blobs),)
                    ).fetchall()
                }
                cur.executemany(
                    "INSERT INTO fxtr_blobs (digest, body) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    [(d, data) for d, data in batch.blobs.items() if d not in have],
                )
            if batch.entries or batch.current:
                entries.write_entries(conn, batch)
            if batch.entities:
                cur.executemany(
                    "INSERT INTO fxtr_entities (id, body) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    list(batch.entities.items()),
                )
            if batch.values:
                cur.executemany(
                    "INSERT INTO fxtr_values (fingerprint, body) VALUES (%s, %s) "
                    "ON CONFLICT DO NOTHING",
                    list(batch.values.items()),
                )
            self._write_records(cur, batch)
            if batch.released:
                cur.execute(
                    "DELETE FROM fxtr_claims WHERE address = ANY(%s)", (list(batch.released),)
                )
