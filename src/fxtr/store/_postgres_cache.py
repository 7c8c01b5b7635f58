"""The PostgreSQL store's step-cache entries: current ones, kept ones, and their writes.

An address's current entry is a row of ``fxtr_entries``; the others it keeps (one per key,
up to ``keep`` with the current one) are rows of ``fxtr_kept``, in the order they stopped
being current (``seq``). Every function runs inside the caller's transaction; the writers
lock the buckets of their addresses first (``lock_buckets``), so two transactions never
displace one entry twice, nor lose one. Only ``_postgres`` uses this module.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from fxtr.store._base import Batch, CacheEntry, checksum_of, entry_key

if TYPE_CHECKING:
    from fxtr.store._postgres import _Locked

BUCKETS = 64
"""Writers of cache entries lock the buckets of their addresses (an advisory lock each, taken
in order): two transactions never displace one entry twice nor lose one."""
COLUMNS = "fingerprint, version, usage, result, meta, checksum, code"
"""An entry's columns, in ``CacheEntry.from_columns`` order."""
K_COLUMNS = ", ".join("k." + c for c in COLUMNS.split(", "))


def move_history(conn: _Locked) -> None:
    """Schema 1 kept replaced entries in ``fxtr_history``: each becomes a kept entry.

    The current entry stays current; of several entries with one key the later is kept,
    in the order they were replaced.
    """
    rows = conn.execute(
        "SELECT h.address, h.entry, e.fingerprint, e.code FROM fxtr_history h "
        "JOIN fxtr_entries e ON e.address = h.address ORDER BY h.id"
    ).fetchall()
    kept: dict[tuple[str, str], CacheEntry] = {}
    for address, text, fp, code in rows:
        try:
            entry = CacheEntry.from_dict(json.loads(text))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # not an entry: nothing to serve
        if entry.key != entry_key(fp, json.loads(code) if code else None):
            kept.pop((address, entry.key), None)
            kept[(address, entry.key)] = entry
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO fxtr_kept (address, key, {COLUMNS}) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            [(a, k, *columns_of(e)) for (a, k), e in kept.items()],
        )
    conn.execute("DELETE FROM fxtr_history")


def lock_buckets(conn: _Locked, addresses: Iterable[str]) -> None:
    buckets = sorted({zlib.crc32(a.encode("utf-8", "surrogatepass")) % BUCKETS for a in addresses})
    conn.execute(
        "SELECT count(pg_advisory_xact_lock(7305842, b)) "
        "FROM (SELECT b FROM unnest(%s::int[]) AS b ORDER BY b) AS ordered",
        (buckets,),
    )


def current_entries(conn: _Locked, addresses: list[str]) -> dict[str, CacheEntry]:
    rows = conn.execute(
        f"SELECT address, {COLUMNS} FROM fxtr_entries WHERE address = ANY(%s)",
        (addresses,),
    ).fetchall()
    return {row[0]: CacheEntry.from_columns(*row[1:]) for row in rows}


def keep_entries(conn: _Locked, displaced: dict[str, CacheEntry]) -> None:
    """Keep entries that stop being current (the newest of their addresses' kept ones)."""
    if not displaced:
        return
    rows = [(a, e.key, *columns_of(e)) for a, e in displaced.items()]
    with conn.cursor() as cur:
        cur.executemany(
            "DELETE FROM fxtr_kept WHERE address = %s AND key = %s", [r[:2] for r in rows]
        )
        cur.executemany(
            f"INSERT INTO fxtr_kept (address, key, {COLUMNS}) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            rows,
        )


def evict_past(conn: _Locked, addresses: list[str], keep: int) -> None:
    """Past ``keep`` entries (the current one included), the ones current longest ago go."""
    if addresses:
        conn.execute(
            "DELETE FROM fxtr_kept k USING (SELECT address, key, row_number() OVER "
            "(PARTITION BY address ORDER BY seq DESC) AS n FROM fxtr_kept "
            "WHERE address = ANY(%s)) AS r "
            "WHERE k.address = r.address AND k.key = r.key AND r.n > %s",
            (addresses, keep - 1),
        )


def make_current(conn: _Locked, wanted: dict[str, str], keep: int) -> dict[str, CacheEntry]:
    """Kept entries become current again, by address and key; the ones that were kept."""
    found = {
        row[0]: CacheEntry.from_columns(*row[1:])
        for row in conn.execute(
            "DELETE FROM fxtr_kept k USING unnest(%s::text[], %s::text[]) AS w(address, key) "
            f"WHERE k.address = w.address AND k.key = w.key RETURNING k.address, {K_COLUMNS}",
            (list(wanted), list(wanted.values())),
        ).fetchall()
    }
    if not found:
        return {}
    currents = current_entries(conn, list(found))
    keep_entries(conn, {a: e for a, e in currents.items() if not e.damaged})
    upsert_entries(conn, found)
    evict_past(conn, list(found), keep)
    return found


def upsert_entries(conn: Any, entries: dict[str, CacheEntry]) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO fxtr_entries (address, {COLUMNS}) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (address) DO UPDATE SET "
            "fingerprint = EXCLUDED.fingerprint, version = EXCLUDED.version, "
            "usage = EXCLUDED.usage, result = EXCLUDED.result, meta = EXCLUDED.meta, "
            "checksum = EXCLUDED.checksum, code = EXCLUDED.code",
            [(address, *columns_of(entry)) for address, entry in entries.items()],
        )


def write_entries(conn: _Locked, batch: Batch) -> None:
    """New current entries (the ones they displace kept) and kept ones made current."""
    keep = max(1, batch.keep)
    lock_buckets(conn, [*batch.entries, *batch.current])
    if batch.entries:
        new = {a: CacheEntry.from_text(t) for a, t in batch.entries.items()}
        # read under the locks: what another process made current is kept too
        currents = current_entries(conn, list(new))
        keep_entries(
            conn, {a: e for a, e in currents.items() if not e.damaged and e.key != new[a].key}
        )
        if currents:
            with conn.cursor() as cur:
                cur.executemany(
                    "DELETE FROM fxtr_kept WHERE address = %s AND key = %s",
                    [(a, new[a].key) for a in currents],
                )
        upsert_entries(conn, new)
        evict_past(conn, list(currents), keep)
    again = {a: k for a, k in batch.current.items() if a not in batch.entries}
    if again:
        make_current(conn, again, keep)


def columns_of(entry: CacheEntry) -> tuple[Any, ...]:
    """An entry's values in ``COLUMNS`` order."""
    return (
        entry.fingerprint,
        entry.version,
        json.dumps(entry.usage) if entry.usage else None,
        entry.result,
        json.dumps(entry.meta),
        checksum_of(entry.result),
        entry.code_text(),
    )
