"""One conformance suite, run against both stores: diskcache and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Annotated

import pytest

from fxtr import StepContext, WorkflowContext, run, step, workflow
from fxtr.cli import main
from fxtr.cli._server import Viewer
from fxtr.experiment.handles import ArrayHandle
from fxtr.store import open_store
from fxtr.store._base import is_url
from tests import examples
from tests.examples import evaluate, qa_inputs
from tests.test_record import KILL_SCRIPT

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=["disk", "postgres"])
def location(request, tmp_path):
    """A fresh, empty store of each kind: a directory, or a new database."""
    if request.param == "disk":
        return str(tmp_path / "store")
    from tests.pgserver import fresh_database

    admin = request.getfixturevalue("postgres_server")
    name = "t_" + request.node.name.lower().replace("[", "_").replace("]", "").replace("-", "_")
    return fresh_database(admin, name[:60])


def test_hit_and_miss(location):
    """A rerun is served from the store; a new key runs."""
    run(evaluate, qa_inputs(), store=location)
    examples.CALLS.clear()
    again = run(evaluate, qa_inputs(), store=location)
    assert again.status == "succeeded" and all(i.from_cache for i in again.invocations)
    assert examples.CALLS == []


def test_conflict_review_overwrite_history_restore(location):
    """Review by default, overwrite keeps history, restore brings it back."""
    run(evaluate, qa_inputs(), store=location)
    changed = qa_inputs({"p1": "what is two plus two", "p2": "capital of italy"})
    assert run(evaluate, changed, store=location).status == "needs_review"
    assert run(evaluate, changed, store=location, conflict="overwrite").status == "succeeded"
    store = open_store(location)
    address = "qa.evaluate/answer[model=a,prompt=p2]"
    (old,) = store.history(address)
    new = store.get_entry(address)
    store.restore(address)
    assert store.get_entry(address).fingerprint == old["fingerprint"]
    assert [h["fingerprint"] for h in store.history(address)] == [new.fingerprint]


RACE = textwrap.dedent(
    """
    import json, sys, time
    from fxtr.store import open_store

    location, who, start, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    store = open_store(location)
    addresses = [f"race/a[i={i}]" for i in range(500)]
    while time.time() < start:
        time.sleep(0.002)
    won = [a for a, holder in store.claim(addresses, f"holder-{who}", 60).items() if holder is None]
    with open(out, "w") as f:
        json.dump(won, f)
    while time.time() < start + 4:  # holders stay alive: a dead holder's claims are free
        time.sleep(0.05)
    """
)


def test_claim_race_between_four_processes(location, tmp_path):
    """Four processes claim 500 addresses at once: exactly one winner per address."""
    open_store(location)  # schema ready before the race
    script = tmp_path / "race.py"
    script.write_text(RACE)
    start = time.time() + 2.0
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                location,
                str(i),
                str(start),
                str(tmp_path / f"won{i}.json"),
            ],
            cwd=ROOT,
        )
        for i in range(4)
    ]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    won = [json.loads((tmp_path / f"won{i}.json").read_text()) for i in range(4)]
    flat = [a for w in won for a in w]
    assert len(flat) == 500 and len(set(flat)) == 500


def test_lease_takeover(location):
    """An expired lease, or a holder process that is gone, is taken over."""
    store = open_store(location)
    assert store.claim(["a", "b"], "first", 0.2) == {"a": None, "b": None}
    assert store.claim(["a"], "second", 60)["a"] == "first"
    time.sleep(0.3)
    assert store.claim(["a"], "second", 60) == {"a": None}
    dead = subprocess.run(
        [
            sys.executable,
            "-c",
            "from fxtr.store import open_store; import sys;"
            f"open_store({location!r}).claim(['c'], 'ghost', 600)",
        ],
        cwd=ROOT,
        check=True,
    )
    assert dead.returncode == 0
    assert store.claim(["c"], "third", 60) == {"c": None}


def test_sigkill_mid_job_then_resume(location, tmp_path):
    """SIGKILL mid-job, then a new launch reruns only what was not stored."""
    script = tmp_path / "kill.py"
    script.write_text(KILL_SCRIPT)
    done = []
    with subprocess.Popen(
        [sys.executable, str(script), location], stdout=subprocess.PIPE, text=True, cwd=ROOT
    ) as proc:
        while len(done) < 12:
            line = proc.stdout.readline()
            assert line
            done.append(line)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    stored = sum(1 for _ in open_store(location).iter_entries())
    assert stored >= len(done) - 4
    second = subprocess.run(
        [sys.executable, str(script), location],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert second.stdout.strip().endswith("succeeded")
    assert len([x for x in second.stdout.splitlines() if x.startswith("done")]) == 40 - stored


def test_concurrent_jobs(location, tmp_path):
    """Two processes run two jobs on one store at once; both complete and are recorded."""
    script = tmp_path / "kill.py"
    script.write_text(KILL_SCRIPT)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), location], stdout=subprocess.PIPE, text=True, cwd=ROOT
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(o.strip().endswith("succeeded") for o in outs)
    ran = sum(len([x for x in o.splitlines() if x.startswith("done")]) for o in outs)
    assert ran == 40
    assert len(list(open_store(location).iter_jobs())) == 2


def test_command_and_viewer_read_the_store(location, capsys):
    """`fxtr jobs`, `fxtr cache` and the viewer work on the store."""
    examples.FAIL.add("capital of france")
    result = run(evaluate, qa_inputs(models=("a",)), store=location)
    assert main(["--store", location, "jobs"]) == 0
    assert result.job_id in capsys.readouterr().out
    assert main(["cache", "--store", location]) == 0
    assert "cache entries: 2" in capsys.readouterr().out
    assert main(["show", result.job_id, "--store", location]) == 0
    assert "tool_error" in capsys.readouterr().out
    (row,) = Viewer(open_store(location)).jobs()
    assert row["failed"] == 1


def test_newer_schema_is_a_clear_error(postgres_server):
    """A database with a newer fxtr schema refuses to open, asking to upgrade fxtr."""
    import psycopg

    from fxtr.store._postgres import PostgresStore, SchemaError
    from tests.pgserver import fresh_database

    url = fresh_database(postgres_server, "newer_schema")
    PostgresStore(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE fxtr_schema SET version = 99")
    with pytest.raises(SchemaError, match="schema 99, newer than this fxtr understands"):
        PostgresStore(url)


def test_credentials_are_never_written(postgres_server, capsys):
    """A password in the store URL appears in no table, message or report."""
    import psycopg

    from fxtr.report import job_report, load_job
    from tests.pgserver import fresh_database

    url = fresh_database(postgres_server, "creds").replace("fxtr@", "fxtr:s3cr3t-pw@")
    result = run(evaluate, qa_inputs(models=("a",)), store=url)
    store = open_store(url)
    assert "s3cr3t-pw" not in repr(store) and "***" in store.path
    assert "s3cr3t-pw" not in json.dumps(job_report(load_job(store, result.job_id)))
    assert main(["jobs", "--store", url]) == 0
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE tablename LIKE 'fxtr%'"
            ).fetchall()
        ]
        for table in tables:
            rows = conn.execute(f"SELECT * FROM {table}").fetchall()
            assert "s3cr3t-pw" not in repr(rows), table
    assert "s3cr3t-pw" not in capsys.readouterr().err


def test_a_cache_hit_does_not_replace_the_run_of_the_same_attempt(location):
    """Processes joining one job record the same invocation; the run is what stays."""
    from fxtr.store import Batch

    store = open_store(location)
    ran = {"address": "j/a", "step": "s", "status": "succeeded", "attempt": 1, "calls": 1}
    hit = {"address": "j/a", "step": "s", "status": "succeeded", "attempt": 1, "from_cache": True}
    store.write(Batch(invocations={"job": [ran]}))
    store.write(Batch(invocations={"job": [hit]}))
    assert store.job_invocations("job")["j/a"] == ran
    later = {**hit, "attempt": 2}
    store.write(Batch(invocations={"job": [later]}))
    assert store.job_invocations("job")["j/a"] == later


def test_status_index_of_both_stores(location):
    """Records by address (optionally by status) and the unfinished ones, in both stores."""
    from fxtr.store import Batch

    store = open_store(location)
    ok = {"address": "j/a", "step": "s", "status": "succeeded", "attempt": 1}
    bad = {"address": "j/b", "step": "s", "status": "failed", "attempt": 1, "error": "E: x"}
    skip = {"address": "j/c", "step": "s", "status": "skipped", "attempt": 1}
    store.write(Batch(invocations={"job": [ok, bad, skip], "other": [bad]}))
    assert store.job_unfinished("job") == {"j/b": bad, "j/c": skip}
    assert store.job_invocations_at("job", ["j/a", "j/b", "j/z"]) == {"j/a": ok, "j/b": bad}
    assert store.job_invocations_at("job", ["j/a", "j/b"], status="succeeded") == {"j/a": ok}
    fixed = {**bad, "status": "succeeded", "attempt": 2, "error": None}
    store.write(Batch(invocations={"job": [fixed]}))
    assert store.job_unfinished("job") == {"j/c": skip}
    assert store.job_unfinished("other") == {"j/b": bad}
    many = [f"j/{i}" for i in range(1200)]  # more than one query's worth of addresses
    store.write(Batch(invocations={"wide": [{**ok, "address": a} for a in many]}))
    assert len(store.job_invocations_at("wide", many, status="succeeded")) == 1200


def test_failure_markers_round_trip(location):
    """A failure written for a joined attempt is read back by key, in bulk."""
    from fxtr.store import Batch

    store = open_store(location)
    store.write(Batch(failures={"job|1|a": '{"address": "a"}'}))
    assert store.get_failures(["job|1|a", "job|1|b"]) == {"job|1|a": '{"address": "a"}'}


def _damage_job_record(location, job_id):
    """Overwrite a job record with bytes that are not a record, as a torn write would."""
    store = open_store(location)
    if hasattr(store, "jobs"):
        store.jobs.set(job_id, '{"job_id": "half a rec')
    else:
        store._conn().execute(
            "UPDATE fxtr_jobs SET record = %s WHERE job_id = %s", ("\x01garbage", job_id)
        )


def test_update_job_merges_fields(location):
    """update_job merges fields into the record; the rest of it stays; no job is a KeyError."""
    result = run(evaluate, qa_inputs(), store=location)
    store = open_store(location)
    before = store.get_job(result.job_id)
    written = store.update_job(result.job_id, evaluation={"gate": {"passed": False}}, note=1)
    after = store.get_job(result.job_id)
    assert after == written
    assert after["evaluation"] == {"gate": {"passed": False}} and after["note"] == 1
    assert {k: v for k, v in after.items() if k not in ("evaluation", "note")} == before
    store.update_job(result.job_id, note=2)
    assert store.get_job(result.job_id)["note"] == 2
    assert store.get_job(result.job_id)["evaluation"] == {"gate": {"passed": False}}
    with pytest.raises(KeyError, match="nope"):
        store.update_job("nope", note=3)


def test_a_damaged_job_record_is_skipped_with_a_warning(location, capsys):
    """One damaged record breaks neither iter_jobs nor `fxtr jobs` for the others."""
    good = run(evaluate, qa_inputs(), store=location)
    bad = run(evaluate, qa_inputs(), store=location)
    _damage_job_record(location, bad.job_id)
    store = open_store(location)
    with pytest.warns(RuntimeWarning, match=f"damaged job record '{bad.job_id}'"):
        jobs = [r["job_id"] for r in store.iter_jobs()]
    assert jobs == [good.job_id]
    assert main(["--store", location, "jobs"]) == 0  # the command shows the warning itself
    out, err = capsys.readouterr()
    assert good.job_id in out and bad.job_id not in out
    assert f"damaged job record '{bad.job_id}'" in err


def test_a_job_id_in_use_is_refused(location):
    """Launching with an existing job id never mixes two jobs' records."""
    first = run(evaluate, qa_inputs(), store=location, job_id="job-1")
    with pytest.raises(ValueError, match="already has a job 'job-1'.*resume"):
        run(evaluate, qa_inputs(models=("b",)), store=location, job_id="job-1")
    record = open_store(location).get_job("job-1")
    assert len(record["attempts"]) == 1
    assert record["inputs"] == open_store(location).get_job(first.job_id)["inputs"]


def test_two_roots_sharing_a_workflow_never_share_addresses(location):
    """Under pytest the root is the eval: two evals of one workflow and ids never conflict."""
    a = run(evaluate, qa_inputs(), store=location, root="evals.test_a::test_qa")
    other = qa_inputs({"p1": "other question", "p2": "capital of italy"})
    b = run(evaluate, other, store=location, root="evals.test_b::test_qa")
    assert a.status == b.status == "succeeded"
    assert all(i.address.startswith("evals.test_a::test_qa/") for i in a.invocations)
    assert all(i.address.startswith("evals.test_b::test_qa/") for i in b.invocations)
    examples.CALLS.clear()
    again = run(evaluate, qa_inputs(), store=location, root="evals.test_a::test_qa")
    assert again.status == "succeeded" and examples.CALLS == []
    store = open_store(location)
    assert store.get_job(a.job_id)["root"] == "evals.test_a::test_qa"
    assert store.get_entry("evals.test_b::test_qa/answer[model=a,prompt=p1]") is not None


RACE_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from fxtr import ScalarHandle, StepContext, WorkflowContext, run, step, workflow

    @step(name="race.slow")
    async def slow(context: StepContext, text: str) -> str:
        print("started", flush=True)
        await asyncio.sleep(float(sys.argv[3]))
        print("ran", flush=True)
        return text.upper()

    @workflow(name="race.wf")
    async def wf(context: WorkflowContext, text: str) -> ScalarHandle[str]:
        return context.run_step("slow", slow, {"text": text})

    result = run(wf, {"text": sys.argv[2]}, store=sys.argv[1], conflict=sys.argv[4])
    print(result.status, flush=True)
    """
)


@pytest.mark.parametrize("policy", ["review", "overwrite"])
def test_claim_won_after_other_inputs(location, tmp_path, policy):
    """Two versions of an eval on one store: the second never replaces the first unreviewed."""
    script = tmp_path / "race.py"
    script.write_text(RACE_SCRIPT)
    first = subprocess.Popen(
        [sys.executable, str(script), location, "one", "2.0", "review"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert first.stdout.readline().strip() == "started"  # it holds the claim now
    second = subprocess.run(
        [sys.executable, str(script), location, "two", "0", policy],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    rest, _ = first.communicate(timeout=120)
    assert rest.split() == ["ran", "succeeded"]
    lines = second.stdout.split()
    store = open_store(location)
    entry = store.get_entry("race.wf/slow")
    if policy == "review":
        assert lines == ["needs_review"], second.stderr
        assert entry.result == json.dumps("ONE")
        assert store.history("race.wf/slow") == []
    else:
        assert lines == ["started", "ran", "succeeded"], second.stderr
        assert entry.result == json.dumps("TWO")
        (old,) = store.history("race.wf/slow")
        assert old["result"] == json.dumps("ONE")


LEAKY_KEY = "sk-proj-CONFORMANCEkey0123456789abcdefXYZ"


def _key_forms(key: str) -> dict[str, str]:
    import base64

    bare = key.removeprefix("sk-proj-")
    return {
        "raw": key,
        "bare": bare,
        "base64": base64.b64encode(key.encode()).decode().rstrip("="),
        "basic": base64.b64encode(f":{key}".encode()).decode().rstrip("="),
    }


@step(name="conformance.leaky")
async def leaky(context: StepContext, case: str) -> dict[str, str]:
    """Echo the key as a careless gateway would: in a log, in a result, in an error."""
    import base64
    import os

    key = os.environ["CONFORMANCE_API_KEY"]
    forms = _key_forms(key)
    context.log(
        f"gateway said: invalid key {forms['bare']} (Authorization: Basic {forms['basic']})"
    )
    if case == "boom":
        raise RuntimeError(f'provider refused {key!r}: {{"echo": "{forms["base64"]}"}}')
    return {"reply": f"Bearer {key}", "b64": base64.b64encode(key.encode()).decode()}


@workflow(name="conformance.leaky_wf")
async def leaky_wf(
    context: WorkflowContext, cases: Annotated[ArrayHandle[str], "[case: str]"]
) -> Annotated[ArrayHandle[dict[str, str]], "[case: str]"]:
    return context.run_step("leak", leaky, {"case": cases}, map_over=["case"])


def _stored_bytes(location: str) -> dict[str, bytes]:
    """Every byte the store holds: each file of a directory (-wal included), or each table."""
    if not is_url(location):
        return {str(p): p.read_bytes() for p in Path(location).rglob("*") if p.is_file()}
    import psycopg

    out = {}
    with psycopg.connect(location, autocommit=True) as conn:
        names = conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'fxtr%'")
        for (table,) in names.fetchall():
            rows = conn.execute(f"SELECT t::text FROM {table} t").fetchall()
            out[table] = "\n".join(r[0] for r in rows).encode()
    return out


def test_no_credential_reaches_the_store_in_any_form(location, monkeypatch):
    """An error, a log line and a result that carry an environment key (raw, without its
    prefix, base64, as HTTP Basic) are stored redacted; the result is read back redacted."""
    import fxtr.secrets
    from fxtr.experiment.arrays import Array

    monkeypatch.setenv("CONFORMANCE_API_KEY", LEAKY_KEY)
    # fxtr.secrets reads the environment again after 0.5 s; make it read it now
    monkeypatch.setattr(fxtr.secrets, "_env_seen", (-1.0, frozenset()))
    cases = Array.from_mapping({"ok": "ok", "boom": "boom"}, dims=["case"], value_type=str)
    result = run(leaky_wf, {"cases": cases}, store=location)
    assert result.status == "failed"
    boom = next(i for i in result.invocations if i.address.endswith("[case=boom]"))
    assert "provider refused" in (boom.error or "")
    stored = _stored_bytes(location)
    assert any(b"provider refused" in data for data in stored.values())
    assert any(b"gateway said" in data for data in stored.values())
    leaks = [
        f"{form} in {name}"
        for form, text in _key_forms(LEAKY_KEY).items()
        for name, data in stored.items()
        if text.encode() in data
    ]
    assert not leaks, leaks
    again = run(leaky_wf, {"cases": cases}, store=location)
    ok = next(i for i in again.invocations if i.address.endswith("[case=ok]"))
    assert ok.from_cache and json.loads(ok.result_text) == {
        "reply": "[redacted]",
        "b64": "[redacted]",
    }


def _damage_entry(location: str, address: str, find: str, put: str) -> None:
    """Change bytes of a stored result behind the store's back (a bit flip on disk)."""
    if is_url(location):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            changed = conn.execute(
                "UPDATE fxtr_entries SET result = replace(result, %s, %s) WHERE address = %s",
                (find, put, address),
            ).rowcount
        assert changed == 1
        return
    import sqlite3

    with sqlite3.connect(Path(location) / "cache" / "cache.db") as con:
        (value,) = con.execute(
            "SELECT value FROM Cache WHERE key = ?", ("e|" + address,)
        ).fetchone()
        text = value if isinstance(value, str) else bytes(value).decode()
        assert find in text
        con.execute(
            "UPDATE Cache SET value = ? WHERE key = ?", (text.replace(find, put), "e|" + address)
        )


def test_a_damaged_entry_is_recomputed_never_served_and_counted(location):
    """A stored result that no longer matches its checksum is a miss: the step runs again,
    the right value comes back, and the address is listed in JobResult.damaged and in the
    attempt's record; the next run is a clean hit."""
    first = run(evaluate, qa_inputs(), store=location)
    address = "qa.evaluate/answer[model=a,prompt=p2]"
    stored = open_store(location).get_entry(address)
    assert stored is not None and len(stored.result) > 4
    good = stored.result
    bad = good[:2] + ("X" if good[2] != "X" else "Y") + good[3:]  # still valid JSON text
    _damage_entry(location, address, good, bad)
    assert open_store(location).get_entry(address).damaged
    examples.CALLS.clear()
    again = run(evaluate, qa_inputs(), store=location)
    assert again.status == "succeeded" and again.output == first.output
    assert again.damaged == [address]
    assert not again.invocation(address).from_cache
    assert len(examples.CALLS) == 1
    record = open_store(location).get_job(again.job_id)
    assert record["attempts"][-1]["damaged"] == [address]
    third = run(evaluate, qa_inputs(), store=location)
    assert third.damaged == [] and all(i.from_cache for i in third.invocations)
    assert "damaged" not in open_store(location).get_job(third.job_id)["attempts"][-1]


def test_an_unreadable_entry_is_a_miss_not_a_crash(tmp_path):
    """An entry text that is not an entry any more (a torn write) is recomputed."""
    location = str(tmp_path / "store")
    first = run(evaluate, qa_inputs(), store=location)
    address = "qa.evaluate/answer[model=a,prompt=p1]"
    open_store(location).cache.set("e|" + address, "{\x00garbage")
    again = run(evaluate, qa_inputs(), store=location)
    assert again.status == "succeeded" and again.output == first.output
    assert again.damaged == [address] and not again.invocation(address).from_cache


# entries kept per fingerprint (DESIGN §13, issue 24) ------------------------------------


def _entry(fp: str, result: str = '"r"', code: dict[str, str] | None = None) -> str:
    from fxtr.store import CacheEntry

    meta = {"step": "s", "created_at": time.time(), "inputs": {}}
    return CacheEntry(fp, None, result, None, meta, code=code).to_text()


def test_an_address_keeps_one_entry_per_fingerprint_up_to_keep(location):
    """Writes displace the current entry into the kept ones; past keep, the LRU one goes."""
    from fxtr.store import Batch

    store = open_store(location)
    a = "keep/one"
    for fp in ("f1", "f2", "f3"):
        store.write(Batch(entries={a: _entry(fp)}, keep=3))
    assert store.get_entry(a).fingerprint == "f3"
    assert [h["fingerprint"] for h in store.history(a)] == ["f1", "f2"]
    assert [e.fingerprint for e in store.get_kept({a: "f1"})[a]] == ["f1"]
    assert store.get_kept({a: "f3"}) == {}  # the current one is not among the kept
    store.write(Batch(current={a: "f1"}, keep=3))  # a hit on f1 makes it current
    assert store.get_entry(a).fingerprint == "f1"
    assert [h["fingerprint"] for h in store.history(a)] == ["f2", "f3"]
    store.write(Batch(entries={a: _entry("f4")}, keep=3))  # f2 was current longest ago
    assert store.get_entry(a).fingerprint == "f4"
    assert [h["fingerprint"] for h in store.history(a)] == ["f3", "f1"]
    store.write(Batch(entries={a: _entry("f1", '"again"')}, keep=3))  # one entry per key
    assert store.get_entry(a).result == '"again"'
    assert [h["fingerprint"] for h in store.history(a)] == ["f3", "f4"]
    store.write(Batch(current={a: "gone"}, keep=3))  # evicted meanwhile: nothing happens
    assert store.get_entry(a).fingerprint == "f1"
    store.write(Batch(entries={a: _entry("f5")}, keep=1))
    assert store.history(a) == [] and store.get_entry(a).fingerprint == "f5"
    assert store.clear_cache() == 1
    assert store.get_entry(a) is None and store.history(a) == []


def test_entries_with_the_same_fingerprint_and_other_code_are_kept_apart(location):
    """A mock's reply digest is part of the entry's key: two of them are two entries."""
    from fxtr.store import Batch

    store = open_store(location)
    a = "keep/code"
    store.write(Batch(entries={a: _entry("fp", '"one"', {"mock/m": "d1"})}))
    store.write(Batch(entries={a: _entry("fp", '"two"', {"mock/m": "d2"})}))
    assert store.get_entry(a).code == {"mock/m": "d2"}
    (kept,) = store.get_kept({a: "fp"})[a]
    assert kept.code == {"mock/m": "d1"} and kept.result == '"one"'
    store.write(Batch(current={a: kept.key}))
    assert store.get_entry(a).result == '"one"'


def test_restore_makes_a_kept_entry_current(location):
    from fxtr.store import Batch

    store = open_store(location)
    a = "keep/restore"
    for fp in ("f1", "f2", "f3"):
        store.write(Batch(entries={a: _entry(fp)}))
    assert store.restore(a, 0)["fingerprint"] == "f1"
    assert store.get_entry(a).fingerprint == "f1"
    assert [h["fingerprint"] for h in store.history(a)] == ["f2", "f3"]
    with pytest.raises(KeyError, match="no 7"):
        store.restore(a, 7)


WRITER = textwrap.dedent(
    """
    import sys, time
    from fxtr.store import Batch, CacheEntry, open_store

    location, who, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    store = open_store(location)
    while time.time() < start:
        time.sleep(0.002)
    addresses = [f"race/w[i={i}]" for i in range(300)]
    for round in range(3):
        for lo in range(0, 300, 25):
            entries = {
                a: CacheEntry(f"{who}-{round}", None, '"x"', None, {"step": "s"}).to_text()
                for a in addresses[lo : lo + 25]
            }
            store.write(Batch(entries=entries, keep=20))
    """
)


def test_two_processes_writing_other_fingerprints_at_the_same_addresses_lose_no_entry(
    location, tmp_path
):
    """Two real processes write 3 fingerprints each at 300 addresses at once: all 6 stay."""
    open_store(location)  # schema ready before the race
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    start = time.time() + 1.5
    procs = [
        subprocess.Popen([sys.executable, str(script), location, who, str(start)], cwd=ROOT)
        for who in ("p", "q")
    ]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    store = open_store(location)
    want = {f"{who}-{r}" for who in "pq" for r in range(3)}
    for i in range(300):
        address = f"race/w[i={i}]"
        kept = [h["fingerprint"] for h in store.history(address)]
        held = [store.get_entry(address).fingerprint, *kept]
        assert sorted(held) == sorted(want), address


def test_a_damaged_kept_entry_is_never_served(location):
    """A kept entry that fails its checksum is no hit: reviewed, and replaced when it reruns."""
    from tests.test_cache_keep import ADDRESS, wf

    run(wf, {"text": "alpha"}, store=location)
    run(wf, {"text": "beta"}, store=location, conflict="overwrite")
    if is_url(location):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            changed = conn.execute(
                "UPDATE fxtr_kept SET result = replace(result, 'ALPHA', 'ALPHX')"
            ).rowcount
        assert changed == 1
    else:
        import sqlite3

        with sqlite3.connect(Path(location) / "cache" / "cache.db") as con:
            key, value = con.execute(
                "SELECT key, value FROM Cache WHERE key LIKE ?", (f"q|{ADDRESS}|%",)
            ).fetchone()
            con.execute(
                "UPDATE Cache SET value = ? WHERE key = ?", (value.replace("ALPHA", "ALPHX"), key)
            )
    # history lists what it can read: the damaged entry is skipped (issue 28), never served
    assert open_store(location).history(ADDRESS) == []
    assert run(wf, {"text": "alpha"}, store=location).status == "needs_review"
    again = run(wf, {"text": "alpha"}, store=location, conflict="overwrite")
    assert again.output.item() == "ALPHA" and not again.invocations[0].from_cache
    (kept,) = open_store(location).history(ADDRESS)  # beta; the damaged one is gone
    assert json.loads(kept["result"]) == "BETA"


# content-addressed parts (DESIGN §17, §18) -------------------------------------------------


def _damage_blob(location: str, digest: str) -> None:
    """Change a stored part's bytes behind the store's back (its digest stays)."""
    if is_url(location):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            changed = conn.execute(
                "UPDATE fxtr_blobs SET body = body || '!'::bytea WHERE digest = %s", (digest,)
            ).rowcount
        assert changed == 1
        return
    store = open_store(location)
    store.cache.set("b|" + digest, b"damaged bytes")


def _drop_blob(location: str, digest: str) -> None:
    if is_url(location):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute("DELETE FROM fxtr_blobs WHERE digest = %s", (digest,))
    else:
        assert open_store(location).cache.delete("b|" + digest)


def test_parts_are_stored_once_by_digest_and_read_back_verified(location):
    """Parts written with a batch read back by digest; a second write of a digest is a no-op;
    a part of megabytes round-trips; a damaged part is absent from the answer."""
    from fxtr.store import Batch, blob_digest

    small, large = b"one small part", os.urandom(3 * 2**20)
    d1, d2 = blob_digest(small), blob_digest(large)
    assert d1 == __import__("hashlib").sha256(small).hexdigest()
    store = open_store(location)
    assert store.has_blobs([d1, d2]) == set() and store.get_blobs([d1]) == {}
    store.write(Batch(blobs={d1: small, d2: large}))
    assert store.has_blobs([d1, d2, "0" * 64]) == {d1, d2}
    assert store.get_blobs([d1, d2, "0" * 64]) == {d1: small, d2: large}
    store.write(Batch(blobs={d1: small}))  # already present: nothing changes
    assert open_store(location).get_blobs([d1]) == {d1: small}
    _damage_blob(location, d1)
    reopened = open_store(location)
    assert reopened.get_blobs([d1, d2]) == {d2: large}  # never returned wrong
    assert d1 not in reopened.has_blobs([d1])  # removed when found: the next write stores it
    reopened.write(Batch(blobs={d1: small}))
    assert open_store(location).get_blobs([d1]) == {d1: small}
    assert open_store(location).volume()["parts"] == 2


def test_parts_are_written_in_the_entries_transaction(location):
    """A batch whose write fails stores neither its entries nor its parts."""
    from fxtr.store import Batch, blob_digest

    store = open_store(location)
    data = b"part of a result"
    digest = blob_digest(data)
    bad = Batch(entries={"parts/a": _entry("fp")}, blobs={digest: data}, invocations={"j": [{}]})
    with pytest.raises(Exception):  # noqa: B017 - a record without an address
        store.write(bad)
    assert store.get_entry("parts/a") is None and store.has_blobs([digest]) == set()


@step(name="conformance.parts")
async def _with_parts(context: StepContext, text: str) -> str:
    from fxtr.store import blob_digest

    data = text.encode() * 1000
    digest = blob_digest(data)
    context.put_blobs({digest: data})
    assert await context.get_blobs([digest]) == {digest: data}  # queued ones are read too
    examples.CALLS.append(text)
    return digest


@workflow(name="conformance.parts_wf")
async def _parts_wf(context: WorkflowContext, text: str) -> Annotated[ArrayHandle[str], "[]"]:
    return context.run_step("s", _with_parts, {"text": text})


@step(name="conformance.read_parts")
async def _read_parts(context: StepContext, digest: str) -> int:
    return len((await context.get_blobs([digest]))[digest])


@workflow(name="conformance.read_parts_wf")
async def _read_parts_wf(context: WorkflowContext, text: str) -> Annotated[ArrayHandle[int], "[]"]:
    digest = context.run_step("s", _with_parts, {"text": text})
    return context.run_step("r", _read_parts, {"digest": digest})


def test_a_cached_result_whose_parts_are_missing_or_damaged_is_a_miss(location):
    """A step's parts are stored with its result; the result is served while they are there;
    a missing or damaged part makes it a miss (the step runs again and stores them again)."""
    first = run(_parts_wf, {"text": "abc"}, store=location)
    digest = first.output.item()
    assert open_store(location).get_blobs([digest]) == {digest: b"abc" * 1000}
    assert open_store(location).get_entry("conformance.parts_wf/s").parts == [digest]
    examples.CALLS.clear()
    assert run(_parts_wf, {"text": "abc"}, store=location).invocations[0].from_cache
    assert examples.CALLS == []
    for spoil in (_drop_blob, _damage_blob):
        spoil(location, digest)
        again = run(_parts_wf, {"text": "abc"}, store=location)
        assert again.status == "succeeded" and again.output.item() == digest
        assert not again.invocations[0].from_cache and examples.CALLS == ["abc"]
        assert again.damaged == ["conformance.parts_wf/s"]
        assert open_store(location).get_blobs([digest]) == {digest: b"abc" * 1000}
        examples.CALLS.clear()
        assert run(_parts_wf, {"text": "abc"}, store=location).invocations[0].from_cache


def test_a_step_reads_the_parts_another_step_wrote(location):
    """Parts queued by one step are read by the next, in the same run and from the store."""
    assert run(_read_parts_wf, {"text": "xy"}, store=location).output.item() == 2000
    again = run(_read_parts_wf, {"text": "xy"}, store=location)
    assert again.output.item() == 2000


def test_put_blobs_refuses_a_part_not_named_by_its_digest(tmp_path):
    """A key that is not the digest of its bytes fails the step, naming the fix."""

    @step(name="conformance.bad_parts")
    async def bad(context: StepContext, text: str) -> str:
        context.put_blobs({"0" * 64: text.encode()})
        return text

    @workflow(name="conformance.bad_parts_wf")
    async def wf(context: WorkflowContext, text: str) -> Annotated[ArrayHandle[str], "[]"]:
        return context.run_step("s", bad, {"text": text})

    result = run(wf, {"text": "x"}, store=str(tmp_path / "store"))
    assert result.status == "failed"
    assert "blob_digest" in result.invocations[0].error


def test_a_part_holding_a_credential_is_not_written(location, monkeypatch):
    """A part is named by its bytes, so it cannot be stored redacted: one that holds a known
    credential is left out of the batch (its entry then misses); the clean ones are written."""
    import fxtr.secrets
    from fxtr.store import Batch, blob_digest
    from fxtr.store._base import redact_batch

    monkeypatch.setenv("CONFORMANCE_API_KEY", LEAKY_KEY)
    monkeypatch.setattr(fxtr.secrets, "_env_seen", (-1.0, frozenset()))
    leaky, clean = f'{{"token": "{LEAKY_KEY}"}}'.encode(), b'{"token": "none"}'
    batch = redact_batch(Batch(blobs={blob_digest(leaky): leaky, blob_digest(clean): clean}))
    open_store(location).write(batch)
    store = open_store(location)
    assert store.has_blobs([blob_digest(leaky), blob_digest(clean)]) == {blob_digest(clean)}
