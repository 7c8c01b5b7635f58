"""Issue 28 items 3 and 8: every kind of damaged cache entry is a miss, recomputed and
counted, on diskcache and on PostgreSQL; history and restore skip what they cannot read.

The damage is done behind the store's back, as a disk, an editor or a torn write does it: a
large result's value file deleted, a result text that no longer decodes though its checksum
was recomputed to match, one changed byte in an entry's header (its fingerprint), a kept
(history) entry cut short.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

import fxtr
from fxtr.experiment.arrays import Array
from fxtr.store import CacheEntry, is_url, open_store
from tests.faults.conftest import fxtr_cli
from tests.faults.flows import batch
from tests.faults.flows_big import CALLS, bigs

ADDRESS = "faults.batch/work[case=a]"


@pytest.fixture(params=["disk", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "disk":
        return str(tmp_path / "store")
    from tests.pgserver import fresh_database

    admin = request.getfixturevalue("postgres_server")
    name = "f_" + request.node.name.lower().replace("[", "_").replace("]", "").replace("-", "_")
    return fresh_database(admin, name[:60])


def _run(location: str, payload: str = "ok", conflict: str = "review") -> Any:
    keys = Array.from_mapping({"a": "a", "b": "b"}, dims=["case"], value_type=str)
    inputs = {"keys": keys, "payload": payload, "gate": ""}
    return fxtr.run(batch, inputs, store=location, conflict=conflict)


def _disk_text(location: str, key: str) -> str:
    with sqlite3.connect(Path(location) / "cache" / "cache.db") as con:
        (value,) = con.execute("SELECT value FROM Cache WHERE key = ?", (key,)).fetchone()
    return value if isinstance(value, str) else bytes(value).decode()


def _disk_put(location: str, key: str, text: str) -> None:
    with sqlite3.connect(Path(location) / "cache" / "cache.db") as con:
        assert con.execute("UPDATE Cache SET value = ? WHERE key = ?", (text, key)).rowcount == 1


def _pg(location: str, sql: str, params: tuple[Any, ...]) -> int:
    import psycopg

    with psycopg.connect(location, autocommit=True) as conn:
        return int(conn.execute(sql, params).rowcount)


def _recomputed(location: str, first: Any) -> None:
    """The next run recomputes the damaged address, counts it, and the one after is clean."""
    again = _run(location)
    assert again.status == "succeeded", [(i.address, i.status, i.error) for i in again.invocations]
    assert again.output == first.output
    assert again.damaged == [ADDRESS]
    assert not again.invocation(ADDRESS).from_cache
    third = _run(location)
    assert third.status == "succeeded" and third.damaged == []
    assert all(i.from_cache for i in third.invocations)


def test_a_deleted_value_file_is_a_damaged_entry(tmp_path: Path) -> None:
    """Item 3: a large result lives in a file beside cache.db; with the file gone, the job
    recomputes it instead of raising FileNotFoundError out of the whole run."""
    store = tmp_path / "store"
    keys = Array.from_mapping({"a": "a", "b": "b"}, dims=["case"], value_type=str)
    first = fxtr.run(bigs, {"keys": keys}, store=str(store))
    assert first.status == "succeeded"
    with sqlite3.connect(store / "cache" / "cache.db") as con:
        (filename,) = con.execute(
            "SELECT filename FROM Cache WHERE key = ?", ("e|faults.bigs/big[case=a]",)
        ).fetchone()
    assert filename, "precondition: the result is kept in a file of its own"
    (store / "cache" / filename).unlink()
    CALLS.clear()
    again = fxtr.run(bigs, {"keys": keys}, store=str(store))
    assert again.status == "succeeded" and again.output == first.output
    assert again.damaged == ["faults.bigs/big[case=a]"] and CALLS == ["a"]
    third = fxtr.run(bigs, {"keys": keys}, store=str(store))
    assert third.damaged == [] and all(i.from_cache for i in third.invocations)


def test_an_undecodable_entry_with_a_matching_checksum_is_damaged(location: str) -> None:
    """Item 8: a result text that does not decode, its checksum made to match: recomputed,
    not a JSONDecodeError out of launch."""
    first = _run(location)
    if is_url(location):
        import psycopg

        from fxtr.store._base import row_checksum

        with psycopg.connect(location, autocommit=True) as conn:
            fp, version, usage, meta, code = conn.execute(
                "SELECT fingerprint, version, usage, meta, code FROM fxtr_entries "
                "WHERE address = %s",
                (ADDRESS,),
            ).fetchone()
            checksum = row_checksum(fp, version, usage, "{not json", meta, code)
            conn.execute(
                "UPDATE fxtr_entries SET result = %s, checksum = %s WHERE address = %s",
                ("{not json", checksum, ADDRESS),
            )
    else:
        entry = CacheEntry.from_text(_disk_text(location, "e|" + ADDRESS))
        entry.result = "{not json"
        _disk_put(location, "e|" + ADDRESS, entry.to_text())
    assert not open_store(location).get_entry(ADDRESS).damaged, "precondition: checksum matches"
    _recomputed(location, first)


def test_a_flipped_byte_in_an_entry_header_is_damaged(location: str) -> None:
    """Item 8: one byte of the fingerprint changed: a damaged entry (recomputed), not a
    conflict that blocks the address for good."""
    first = _run(location)
    if is_url(location):
        changed = _pg(
            location,
            "UPDATE fxtr_entries SET fingerprint = "
            "(CASE WHEN left(fingerprint, 1) = 'Z' THEN 'Y' ELSE 'Z' END) || substr(fingerprint, 2) "
            "WHERE address = %s",
            (ADDRESS,),
        )
        assert changed == 1
    else:
        head, fp, rest = _disk_text(location, "e|" + ADDRESS).split("\n", 2)
        flipped = ("Z" if fp[0] != "Z" else "Y") + fp[1:]
        _disk_put(location, "e|" + ADDRESS, "\n".join([head, flipped, rest]))
    _recomputed(location, first)
    history = fxtr_cli("--store", location, "cache", "history", ADDRESS)
    assert history.returncode == 0 and "Traceback" not in history.stderr, history.stderr


def test_a_cut_history_entry_is_skipped_and_the_address_still_stores(location: str) -> None:
    """Item 8: a kept entry cut short: history and restore skip it, later runs store."""
    assert _run(location, "ok").status == "succeeded"
    assert _run(location, "two", conflict="overwrite").status == "succeeded"
    assert _run(location, "three", conflict="overwrite").status == "succeeded"
    kept = open_store(location).history(ADDRESS)
    assert len(kept) == 2, kept
    if is_url(location):
        cut = _pg(
            location,
            "UPDATE fxtr_kept SET meta = left(meta, 7) WHERE address = %s AND seq = "
            "(SELECT min(seq) FROM fxtr_kept WHERE address = %s)",
            (ADDRESS, ADDRESS),
        )
        assert cut == 1
    else:
        with sqlite3.connect(Path(location) / "cache" / "cache.db") as con:
            (key,) = con.execute(
                "SELECT key FROM Cache WHERE key LIKE ? ORDER BY rowid LIMIT 1",
                (f"q|{ADDRESS}|%",),
            ).fetchone()
        _disk_put(location, key, _disk_text(location, key)[:25])
    history = fxtr_cli("--store", location, "cache", "history", ADDRESS)
    assert history.returncode == 0, history.stderr
    assert "Traceback" not in history.stdout + history.stderr
    assert len(open_store(location).history(ADDRESS)) == 1
    later = _run(location, "four", conflict="overwrite")
    assert later.status == "succeeded", [(i.address, i.status, i.error) for i in later.invocations]
    assert later.invocation(ADDRESS).status == "succeeded"
    restored = fxtr_cli("--store", location, "cache", "restore", ADDRESS)
    assert restored.returncode == 0, restored.stderr
    assert _run(location, "ok").invocation(ADDRESS).status in ("succeeded", "needs_review")
