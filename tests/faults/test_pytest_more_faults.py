"""Issue 15 under pytest: a damaged cache entry is recomputed and the summary says so."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from pathlib import Path

from tests.faults.test_pytest_faults import _project, _pytest


def test_damaged_entry_is_recomputed_and_counted_in_the_summary(tmp_path: Path) -> None:
    """Item 4: a flipped byte in a stored result: recomputed, summary says damaged."""
    _project(tmp_path, evals={"test_d": (["q one", "q two"], ["c1", "c2"])})
    assert _pytest(tmp_path).returncode == 0
    with sqlite3.connect(tmp_path / ".fxtr" / "cache" / "cache.db") as con:
        rows = con.execute("SELECT key, value FROM Cache WHERE key LIKE 'e|%c1%'").fetchall()
        assert len(rows) == 1, rows
        key, value = rows[0]
        text = value if isinstance(value, str) else bytes(value).decode()
        assert "1.0" in text, text
        con.execute("UPDATE Cache SET value = ? WHERE key = ?", (text.replace("1.0", "0.0"), key))
    proc = _pytest(tmp_path, "--fxtr-report=r.json")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    (job,) = json.loads((tmp_path / "r.json").read_text())["jobs"]
    c1 = [inv for inv in job["invocations"] if "c1" in inv["address"]]
    assert c1 and not c1[0]["from_cache"], c1
    assert "damaged" in out, textwrap.shorten(out, 3000)
