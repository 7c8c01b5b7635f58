"""Store faults of issue 15: one result that cannot be stored fails only its invocation, a
damaged or garbled entry is a miss (recomputed, never served), and a file that is not a store
is one clear error naming the path and the fix."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from tests.faults.conftest import (
    KEYS50,
    PYTHON,
    ROOT,
    by_address,
    cache_keys,
    claim_rows,
    env,
    fxtr_cli,
    job,
)


def test_one_unstorable_result_fails_only_its_invocation(store: Path) -> None:
    """Item 1: a lone surrogate in one of 50 results; the other 49 are stored."""
    first = job({"store": str(store), "keys": KEYS50, "payload": "surrogate@k07"})
    invs = by_address(first)
    bad = invs["faults.batch/work[case=k07]"]
    assert first["status"] != "succeeded", first["status"]
    assert bad["status"] == "failed", bad
    assert "faults.work" in bad["error"] and "k07" in bad["error"], bad["error"]
    others = [inv for a, inv in invs.items() if a != "faults.batch/work[case=k07]"]
    assert [inv["status"] for inv in others] == ["succeeded"] * 49
    assert claim_rows(store) == [], "claims left behind"
    assert len(cache_keys(store, "e|")) == 49
    second = job({"store": str(store), "keys": KEYS50, "payload": "surrogate@k07"})
    cached = [inv["from_cache"] for a, inv in by_address(second).items() if "k07" not in a]
    assert cached == [True] * 49, "the 49 good results were not kept"


def _damage_entry(store: Path, address: str) -> None:
    """Change the stored result of an entry, keeping it valid JSON (a silent bit flip)."""
    with sqlite3.connect(store / "cache" / "cache.db") as con:
        (value,) = con.execute("SELECT value FROM Cache WHERE key = ?", ("e|" + address,)).fetchone()
        text = value if isinstance(value, str) else bytes(value).decode()
        assert "ok:k1" in text, text
        damaged = text.replace("ok:k1", "ok:kX")
        con.execute("UPDATE Cache SET value = ? WHERE key = ?", (damaged, "e|" + address))


def test_damaged_entry_is_a_miss_never_served(store: Path) -> None:
    """Item 4: a flipped value is recomputed, not served."""
    job({"store": str(store), "keys": ["k1", "k2"], "payload": "ok"})
    _damage_entry(store, "faults.batch/work[case=k1]")
    again = job({"store": str(store), "keys": ["k1", "k2"], "payload": "ok"})
    assert again["status"] == "succeeded", again
    assert again["output"] == {"k1": "ok:k1", "k2": "ok:k2"}, "a damaged result was served"
    invs = by_address(again)
    assert invs["faults.batch/work[case=k1]"]["from_cache"] is False
    assert invs["faults.batch/work[case=k2]"]["from_cache"] is True


def test_garbled_entry_text_is_a_miss_not_a_crash(store: Path) -> None:
    """Item 4: an entry that is not even JSON any more is a miss, the job goes on."""
    job({"store": str(store), "keys": ["k1", "k2"], "payload": "ok"})
    with sqlite3.connect(store / "cache" / "cache.db") as con:
        con.execute("UPDATE Cache SET value = ? WHERE key = ?",
                    ("{\x00garbage", "e|faults.batch/work[case=k1]"))
    again = job({"store": str(store), "keys": ["k1", "k2"], "payload": "ok"})
    assert again["status"] == "succeeded" and again["output"] == {"k1": "ok:k1", "k2": "ok:k2"}


def test_garbled_cache_db_is_one_clear_error(store: Path) -> None:
    """Item 4: a store that is not a store: launch and `fxtr` say the path and what to do."""
    job({"store": str(store), "keys": ["k1"], "payload": "ok"})
    db = store / "cache" / "cache.db"
    db.write_bytes(b"this is not a database " * 200)
    for wal in db.parent.glob("cache.db-*"):
        wal.unlink()
    proc = subprocess.run(
        [PYTHON, "-m", "tests.faults.driver", json.dumps({"store": str(store), "keys": ["k1"]})],
        capture_output=True, text=True, env=env(), cwd=ROOT, timeout=30,
    )
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert str(db) in last or str(store) in last, proc.stderr[-2000:]
    assert "DatabaseError" not in last or "fxtr" in last.lower(), last
    cli = fxtr_cli("--store", str(store), "jobs")
    assert cli.returncode == 1, cli
    assert "Traceback" not in cli.stderr, cli.stderr
    assert str(store) in cli.stderr, cli.stderr
    assert len(cli.stderr.strip().splitlines()) == 1, cli.stderr
