"""Project arrays' tables, the same in both stores: arrays, their rows, their snapshots.

``fxtr.arrays`` is the public side (types, keys and values); this module keeps texts only:
a row is its key's JSON text and its value's canonical text, a snapshot its content's
canonical text and digest. Three tables, beside each store's own (SQLite's in the embedded
store's ``cache.db``, on the cache's connection, so ``cache.transact()`` covers them;
PostgreSQL's in the store's database), created on first use:

- ``fxtr_arrays``: one row per array: name, dimensions (JSON), the value type's name, the
  version (raised by every edit that changes a row), the next row position, times.
- ``fxtr_array_rows``: the current rows, by array and key, with their position (first
  upsert first: an array's keys keep the order they were added in).
- ``fxtr_array_snapshots``: by array and number (1, 2, ...): the version it froze, the
  content's digest and canonical text, its row count and time. Never updated, and kept when
  the array is dropped: a snapshot's rows never change.

An edit and a snapshot are one transaction each, with the array's row locked (PostgreSQL's
``FOR UPDATE``; SQLite's write lock), so two writers never take one number or one position.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS fxtr_arrays (
        name TEXT PRIMARY KEY, dims TEXT NOT NULL, value_type TEXT NOT NULL,
        version INTEGER NOT NULL, next_position INTEGER NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS fxtr_array_rows (
        name TEXT NOT NULL, key TEXT NOT NULL, position INTEGER NOT NULL, value TEXT NOT NULL,
        PRIMARY KEY (name, key))""",
    """CREATE TABLE IF NOT EXISTS fxtr_array_snapshots (
        name TEXT NOT NULL, number INTEGER NOT NULL, version INTEGER NOT NULL,
        digest TEXT NOT NULL, row_count INTEGER NOT NULL, content TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (name, number))""",
)
_CHUNK = 500
"""Keys per ``IN (...)`` query (SQLite's default limit on parameters is 999 or more)."""
_ARRAY_COLUMNS = "name, dims, value_type, version, created_at, updated_at"
_SNAPSHOT_COLUMNS = "name, number, version, digest, row_count, created_at"


class _Sql:
    """One store's SQL connection as the tables need it: ``?`` placeholders in both."""

    postgres = False

    def rows(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def many(self, statement: str, rows: list[tuple[Any, ...]]) -> None:
        raise NotImplementedError

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError


class _SqliteSql(_Sql):
    def __init__(self, cache: Any) -> None:
        self._cache = cache

    def rows(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return list(self._cache._sql(statement, params).fetchall())

    def many(self, statement: str, rows: list[tuple[Any, ...]]) -> None:
        self._cache._con.executemany(statement, rows)

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        return self._cache.transact()  # type: ignore[no-any-return]


class _PostgresSql(_Sql):
    postgres = True

    def __init__(self, store: Any) -> None:
        self._store = store

    def rows(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        cur = self._store._conn().execute(statement.replace("?", "%s"), params)
        return list(cur.fetchall()) if cur.description is not None else []

    def many(self, statement: str, rows: list[tuple[Any, ...]]) -> None:
        conn = self._store._conn()
        with conn.lock, conn.cursor() as cur:
            cur.executemany(statement.replace("?", "%s"), rows)

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        return self._store._conn().transaction()  # type: ignore[no-any-return]


_TABLES: dict[int, tuple[Any, ProjectTables]] = {}
_TABLES_LOCK = threading.Lock()


def project_tables(store: Any) -> ProjectTables:
    """The project-array tables of a store (``DiskStore`` or ``PostgresStore``), created once.

    Raises:
        TypeError: the object is not one of fxtr's stores.
    """
    with _TABLES_LOCK:
        known = _TABLES.get(id(store))
        if known is not None and known[0] is store:
            return known[1]
        if hasattr(store, "cache") and hasattr(store.cache, "_sql"):
            sql: _Sql = _SqliteSql(store.cache)
        elif hasattr(store, "_conn"):
            sql = _PostgresSql(store)
        else:
            msg = (
                f"{store!r} is not an fxtr store; project arrays live in a DiskStore or a "
                "PostgresStore (fxtr.store.open_store(PATH_OR_URL))."
            )
            raise TypeError(msg)
        tables = ProjectTables(sql)
        _TABLES[id(store)] = (store, tables)
        return tables


class ProjectTables:
    """Project arrays' rows and snapshots in one store, as texts."""

    def __init__(self, sql: _Sql) -> None:
        self._sql = sql
        self._ready = False

    def _create(self) -> None:
        if self._ready:
            return
        with self._sql.transaction():
            if self._sql.postgres:  # concurrent CREATE IF NOT EXISTS can collide in PostgreSQL
                self._sql.rows("SELECT pg_advisory_xact_lock(7305842)")
            for statement in _SCHEMA:
                self._sql.rows(statement)
        self._ready = True

    @contextlib.contextmanager
    def _locked(self, name: str) -> Iterator[dict[str, Any]]:
        """A transaction holding the array's row; yields the array (KeyError: none)."""
        self._create()
        with self._sql.transaction():
            lock = " FOR UPDATE" if self._sql.postgres else ""
            found = self._sql.rows(
                f"SELECT {_ARRAY_COLUMNS}, next_position FROM fxtr_arrays WHERE name = ?{lock}",
                (name,),
            )
            if not found:
                raise KeyError(name)
            info = _array_info(found[0])
            info["next_position"] = found[0][6]
            yield info

    # arrays ------------------------------------------------------------------------------

    def create(self, name: str, dims: str, value_type: str) -> dict[str, Any]:
        """Create an array unless one has the name; the array's info either way."""
        self._create()
        now = time.time()
        with self._sql.transaction():
            # an array made again under a dropped one's name starts past its snapshots' versions
            ((last,),) = self._sql.rows(
                "SELECT COALESCE(MAX(version) + 1, 0) FROM fxtr_array_snapshots WHERE name = ?",
                (name,),
            )
            self._sql.rows(
                "INSERT INTO fxtr_arrays (name, dims, value_type, version, next_position, "
                "created_at, updated_at) VALUES (?, ?, ?, ?, 0, ?, ?) "
                "ON CONFLICT (name) DO NOTHING",
                (name, dims, value_type, int(last), now, now),
            )
        info = self.get(name)
        assert info is not None
        return info

    def get(self, name: str) -> dict[str, Any] | None:
        """An array's info (name, dims, value_type, version, times, rows), or None."""
        self._create()
        found = self._sql.rows(f"SELECT {_ARRAY_COLUMNS} FROM fxtr_arrays WHERE name = ?", (name,))
        if not found:
            return None
        info = _array_info(found[0])
        info["rows"] = self._count(name)
        return info

    def all_arrays(self) -> list[dict[str, Any]]:
        """Every array's info, by name, with its row and snapshot counts."""
        self._create()
        out = []
        for row in self._sql.rows(f"SELECT {_ARRAY_COLUMNS} FROM fxtr_arrays ORDER BY name"):
            info = _array_info(row)
            info["rows"] = self._count(info["name"])
            ((count,),) = self._sql.rows(
                "SELECT COUNT(*) FROM fxtr_array_snapshots WHERE name = ?", (info["name"],)
            )
            info["snapshots"] = int(count)
            out.append(info)
        return out

    def _count(self, name: str) -> int:
        ((count,),) = self._sql.rows("SELECT COUNT(*) FROM fxtr_array_rows WHERE name = ?", (name,))
        return int(count)

    def drop(self, name: str) -> bool:
        """Remove an array and its rows, keeping its snapshots; whether there was one."""
        self._create()
        with self._sql.transaction():
            found = self._sql.rows("SELECT name FROM fxtr_arrays WHERE name = ?", (name,))
            self._sql.rows("DELETE FROM fxtr_array_rows WHERE name = ?", (name,))
            self._sql.rows("DELETE FROM fxtr_arrays WHERE name = ?", (name,))
        return bool(found)

    # rows --------------------------------------------------------------------------------

    def rows(self, name: str) -> list[tuple[str, str]]:
        """The current rows, ``(key text, value text)``, in the order their keys were added."""
        self._create()
        found = self._sql.rows(
            "SELECT key, value FROM fxtr_array_rows WHERE name = ? ORDER BY position", (name,)
        )
        return [(k, v) for k, v in found]

    def edit(
        self, name: str, upserts: Iterable[tuple[str, str]], deletes: Iterable[str], *, clear: bool
    ) -> int:
        """Change rows in one transaction; how many rows changed (the version rises if any).

        ``clear`` removes every row first (keys upserted again keep their positions);
        ``upserts`` set a key's value (a new key goes last); ``deletes`` remove keys.
        """
        upserts, deletes = list(upserts), list(deletes)
        with self._locked(name) as info:
            # the rows the edit touches (every row when clearing), not the whole array
            current = self._current(name, None if clear else [k for k, _ in upserts] + deletes)
            wanted = {} if clear else {k: v for k, (v, _) in current.items()}
            for key in deletes:
                wanted.pop(key, None)
            for key, value in upserts:
                wanted[key] = value
            position = int(info["next_position"])
            gone = [k for k in current if k not in wanted]
            changed: list[tuple[Any, ...]] = []
            for key, value in wanted.items():
                old = current.get(key)
                if old is None:
                    changed.append((name, key, position, value))
                    position += 1
                elif old[0] != value:
                    changed.append((name, key, old[1], value))
            if not gone and not changed:
                return 0
            self._sql.many(
                "DELETE FROM fxtr_array_rows WHERE name = ? AND key = ?", [(name, k) for k in gone]
            )
            self._sql.many(
                "INSERT INTO fxtr_array_rows (name, key, position, value) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (name, key) DO UPDATE SET value = excluded.value",
                changed,
            )
            self._sql.rows(
                "UPDATE fxtr_arrays SET version = version + 1, next_position = ?, "
                "updated_at = ? WHERE name = ?",
                (position, time.time(), name),
            )
            return len(gone) + len(changed)

    def _current(self, name: str, keys: list[str] | None) -> dict[str, tuple[str, int]]:
        """``{key: (value, position)}`` of the given keys' rows (of every row for None)."""
        select = "SELECT key, value, position FROM fxtr_array_rows WHERE name = ?"
        if keys is None:
            return {k: (v, p) for k, v, p in self._sql.rows(select, (name,))}
        out: dict[str, tuple[str, int]] = {}
        unique = list(dict.fromkeys(keys))
        for i in range(0, len(unique), _CHUNK):
            part = unique[i : i + _CHUNK]
            marks = ", ".join("?" * len(part))
            for k, v, p in self._sql.rows(f"{select} AND key IN ({marks})", (name, *part)):
                out[k] = (v, p)
        return out

    # snapshots ---------------------------------------------------------------------------

    def snapshot(
        self, name: str, freeze: Callable[[list[tuple[str, str]]], tuple[str, str]]
    ) -> tuple[dict[str, Any], bool]:
        """Freeze the current rows: the snapshot, and whether it is new.

        ``freeze(rows)`` gives the rows' canonical content text and its digest. When the
        latest snapshot has that digest it is returned (nothing changed since), else the
        next number is taken.
        """
        with self._locked(name) as info:
            latest = self._sql.rows(
                f"SELECT {_SNAPSHOT_COLUMNS} FROM fxtr_array_snapshots WHERE name = ? "
                "ORDER BY number DESC LIMIT 1",
                (name,),
            )
            if latest and latest[0][2] == info["version"]:
                return _snapshot_info(latest[0]), False
            rows = self.rows(name)
            content, digest = freeze(rows)
            if latest and latest[0][3] == digest:
                return _snapshot_info(latest[0]), False
            number = latest[0][1] + 1 if latest else 1
            now = time.time()
            self._sql.rows(
                "INSERT INTO fxtr_array_snapshots (name, number, version, digest, row_count, "
                "content, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (name, number, info["version"], digest, len(rows), content, now),
            )
            snap = (name, number, info["version"], digest, len(rows), now)
            return _snapshot_info(snap), True

    def snapshots(self, name: str) -> list[dict[str, Any]]:
        """An array's snapshots, oldest first (without their content)."""
        self._create()
        found = self._sql.rows(
            f"SELECT {_SNAPSHOT_COLUMNS} FROM fxtr_array_snapshots WHERE name = ? ORDER BY number",
            (name,),
        )
        return [_snapshot_info(row) for row in found]

    def snapshot_content(self, name: str, number: int | None) -> tuple[dict[str, Any], str] | None:
        """A snapshot (the latest for ``None``) and its content text, or None."""
        self._create()
        where = "number = ?" if number is not None else "1 = 1"
        params: tuple[Any, ...] = (name, number) if number is not None else (name,)
        found = self._sql.rows(
            f"SELECT {_SNAPSHOT_COLUMNS}, content FROM fxtr_array_snapshots "
            f"WHERE name = ? AND {where} ORDER BY number DESC LIMIT 1",
            params,
        )
        if not found:
            return None
        return _snapshot_info(found[0][:6]), found[0][6]


def _array_info(row: tuple[Any, ...]) -> dict[str, Any]:
    name, dims, value_type, version, created, updated = row[:6]
    return {
        "name": name,
        "dims": dims,
        "value_type": value_type,
        "version": int(version),
        "created_at": float(created),
        "updated_at": float(updated),
    }


def _snapshot_info(row: tuple[Any, ...]) -> dict[str, Any]:
    name, number, version, digest, count, created = row
    return {
        "name": name,
        "number": int(number),
        "version": int(version),
        "digest": digest,
        "rows": int(count),
        "created_at": float(created),
    }
