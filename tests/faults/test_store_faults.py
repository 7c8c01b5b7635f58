"""Issue 15, items 1, 2, 4, 6: results are never lost, replaced silently, or served damaged."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from tests.faults.conftest import (
    PYTHON,
    ROOT,
    env,
    finish,
    fxtr_cli,
    job,
    start_job,
    wait_for,
)


def test_concurrent_job_with_other_inputs_goes_to_review(store: Path, tmp_path: Path) -> None:
    """Item 2: B waits on A's claim, A commits other inputs' result: B is needs_review."""
    gate = tmp_path / "gate"
    gate.mkdir()
    out_a, out_b = tmp_path / "a.json", tmp_path / "b.json"
    a = start_job({"store": str(store), "keys": ["k1"], "payload": "A", "gate": str(gate),
                   "out": str(out_a)})
    wait_for(lambda: (gate / "started-k1").exists(), "A's step to start")
    b = start_job({"store": str(store), "keys": ["k1"], "payload": "B", "out": str(out_b)})
    wait_for(lambda: len(list(_job_ids(store))) >= 2, "B's job record")
    (gate / "go").touch()
    ra, rb = finish(a, out_a), finish(b, out_b)
    assert ra["status"] == "succeeded"
    assert rb["status"] == "needs_review", rb
    again = job({"store": str(store), "keys": ["k1"], "payload": "A", "gate": str(gate)})
    assert again["output"] == {"k1": "A:k1"}, "A's entry was replaced"


def test_concurrent_job_overwrite_keeps_history(store: Path, tmp_path: Path) -> None:
    """Item 2: with overwrite, the entry B replaces is in the history."""
    gate = tmp_path / "gate"
    gate.mkdir()
    out_a, out_b = tmp_path / "a.json", tmp_path / "b.json"
    a = start_job({"store": str(store), "keys": ["k1"], "payload": "A", "gate": str(gate),
                   "out": str(out_a)})
    wait_for(lambda: (gate / "started-k1").exists(), "A's step to start")
    b = start_job({"store": str(store), "keys": ["k1"], "payload": "B", "conflict": "overwrite",
                   "out": str(out_b)})
    wait_for(lambda: len(list(_job_ids(store))) >= 2, "B's job record")
    (gate / "go").touch()
    finish(a, out_a)
    rb = finish(b, out_b)
    assert rb["status"] == "succeeded" and rb["output"] == {"k1": "B:k1"}, rb
    history = fxtr_cli("--store", str(store), "cache", "history", "faults.batch/work[case=k1]")
    assert history.returncode == 0, history.stderr
    ra = json.loads(out_a.read_text())
    lines = history.stdout.splitlines()
    assert any(line.startswith("[0]") and ra["job_id"] in line for line in lines), (
        f"A's entry (job {ra['job_id']}) is not in the history:\n{history.stdout}")
    assert any(line.startswith("[current]") and rb["job_id"] in line for line in lines)


def _job_ids(store: Path) -> list[str]:
    db = store / "cache" / "cache.db"
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db, timeout=5) as con:
            return [k for (k,) in con.execute("SELECT job_id FROM FxtrJobs").fetchall()]
    except sqlite3.OperationalError:  # not created yet
        return []


def test_damaged_job_record_does_not_hide_the_others(store: Path) -> None:
    """Item 4: `fxtr jobs` lists the healthy job and says one record was skipped."""
    one = job({"store": str(store), "keys": ["k1"], "payload": "ok"})
    two = job({"store": str(store), "keys": ["k1"], "payload": "ok"})
    with sqlite3.connect(store / "cache" / "cache.db") as con:
        con.execute("UPDATE FxtrJobs SET record = ? WHERE job_id = ?", ("{not json", one["job_id"]))
    listing = fxtr_cli("--store", str(store), "jobs")
    assert listing.returncode == 0, listing.stderr
    assert two["job_id"][:8] in listing.stdout, listing.stdout
    assert "Traceback" not in listing.stderr
    assert "damaged" in listing.stderr, listing.stderr


def test_fxtr_jobs_names_each_damaged_job_record_and_its_store(store: Path) -> None:
    """Issue 28 item 4: a record that is not JSON, one with broken fields and one whose
    invocation records are cut are each named (job id, store), the healthy job listed."""
    ids = [job({"store": str(store), "keys": ["k1"], "payload": f"ok{i}"})["job_id"]
           for i in range(4)]
    garbled, broken, cut, healthy = ids
    with sqlite3.connect(store / "cache" / "cache.db") as con:
        con.execute("UPDATE FxtrJobs SET record = ? WHERE job_id = ?", ("{not json", garbled))
        (text,) = con.execute("SELECT record FROM FxtrJobs WHERE job_id = ?", (broken,)).fetchone()
        record = json.loads(text)
        record["attempts"] = "??"
        con.execute("UPDATE FxtrJobs SET record = ? WHERE job_id = ?", (json.dumps(record), broken))
        rows = con.execute(
            "SELECT address, record FROM FxtrInvocations WHERE job_id = ?", (cut,)
        ).fetchall()
        assert rows, "precondition: the job's invocation records are in FxtrInvocations"
        for address, value in rows:
            con.execute("UPDATE FxtrInvocations SET record = ? WHERE job_id = ? AND address = ?",
                        (str(value)[:7], cut, address))
    listing = fxtr_cli("--store", str(store), "jobs")
    assert listing.returncode == 0, listing.stderr
    assert healthy[:8] in listing.stdout, listing.stdout
    # issue 25: a job's row comes from the summary in its record, so a job whose invocation
    # records are cut is still listed; reading them (export) names the damage and the store
    assert cut[:8] in listing.stdout, listing.stdout
    assert "Traceback" not in listing.stderr, listing.stderr
    lines = listing.stderr.splitlines()
    for job_id in (garbled, broken):
        assert job_id[:8] not in listing.stdout, listing.stdout
        named = [line for line in lines if job_id in line]
        assert len(named) == 1, (job_id, listing.stderr)
    assert str(store) in listing.stderr, listing.stderr
    assert "skipped 1 damaged job record(s)" in listing.stderr, listing.stderr
    exported = fxtr_cli("--store", str(store), "export", cut)
    assert exported.returncode == 1 and "Traceback" not in exported.stderr, exported.stderr
    assert cut in exported.stderr and "damaged" in exported.stderr, exported.stderr
    assert str(store) in exported.stderr, exported.stderr


def test_a_job_id_in_use_is_refused(store: Path) -> None:
    """Item 6: launching with an existing job id never mixes two jobs' records."""
    first = job({"store": str(store), "keys": ["k1"], "payload": "ok", "job_id": "fixed-id"})
    assert first["job_id"] == "fixed-id"
    spec = {"store": str(store), "keys": ["k2"], "payload": "other", "job_id": "fixed-id"}
    proc = subprocess.run([PYTHON, "-m", "tests.faults.driver", json.dumps(spec)],
                          capture_output=True, text=True, env=env(), cwd=ROOT, timeout=30)
    assert proc.returncode != 0, "a second job was launched under an id in use"
    assert "fixed-id" in proc.stderr
    show = fxtr_cli("--store", str(store), "show", "fixed-id")
    assert "k2" not in show.stdout, show.stdout


def test_sigkill_mid_batch_then_resume_loses_only_in_flight(store: Path, tmp_path: Path) -> None:
    """A SIGKILL while one step hangs: the finished ones are kept, resume runs the rest."""
    gate = tmp_path / "gate"
    gate.mkdir()
    keys = [f"k{i}" for i in range(6)]
    proc = start_job({"store": str(store), "keys": keys, "payload": "ok", "gate": str(gate),
                      "out": str(tmp_path / "x.json")})
    wait_for(lambda: len(list(gate.glob("started-*"))) == 6, "all steps to start")
    proc.kill()
    proc.wait(10)
    (gate / "go").touch()
    ids = _job_ids(store)
    assert len(ids) == 1, ids
    resumed = job({"store": str(store), "resume": ids[0]})
    assert resumed["job_id"] == ids[0] and resumed["attempt"] == 2, resumed
    assert resumed["status"] == "succeeded"
    assert resumed["output"] == {k: f"ok:{k}" for k in keys}
