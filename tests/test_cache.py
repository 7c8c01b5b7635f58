"""The step cache: hit, miss, conflicts, code drift, version bumps, history, claims."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fxtr import ScalarHandle, StepContext, WorkflowContext, run, step, workflow
from fxtr.store import open_store
from tests import examples
from tests.examples import evaluate, qa_inputs


def test_rerun_is_served_from_the_cache_and_runs_nothing():
    """Same address, same fingerprint: nothing runs; every invocation is from_cache."""
    first = run(evaluate, qa_inputs())
    examples.CALLS.clear()
    second = run(evaluate, qa_inputs())
    assert examples.CALLS == []
    assert second.job_id != first.job_id
    assert second.status == "succeeded"
    assert all(inv.from_cache for inv in second.invocations)
    assert second.output == first.output


def test_new_keys_run_and_old_ones_are_reused():
    """A new prompt runs its own line of work; the per-model means, whose input grew, conflict."""
    run(evaluate, qa_inputs())
    examples.CALLS.clear()
    three = {"p1": "what is two plus two", "p2": "capital of france", "p3": "new"}
    result = run(evaluate, qa_inputs(three))
    assert sorted(examples.CALLS) == sorted(
        [
            "qa.evaluate/answer[model=a,prompt=p3]",
            "qa.evaluate/answer[model=b,prompt=p3]",
            "qa.evaluate/score[model=a,prompt=p3]",
            "qa.evaluate/score[model=b,prompt=p3]",
        ]
    )
    assert result.status == "needs_review"
    assert {c.address for c in result.conflicts} == {
        "qa.evaluate/summarize[model=a]/mean",
        "qa.evaluate/summarize[model=b]/mean",
    }
    assert all(c.conflict["inputs"] == ["scores"] for c in result.conflicts)
    examples.CALLS.clear()
    result = run(evaluate, qa_inputs(three), conflict="overwrite")
    assert sorted(examples.CALLS) == [
        "qa.evaluate/summarize[model=a]/mean",
        "qa.evaluate/summarize[model=b]/mean",
    ]
    assert result.status == "succeeded"


def test_changed_input_needs_review_by_default():
    """A changed input at a cached address is not run; the job ends needs_review."""
    run(evaluate, qa_inputs())
    examples.CALLS.clear()
    changed = qa_inputs({"p1": "what is two plus two", "p2": "capital of italy"})
    result = run(evaluate, changed)
    assert result.status == "needs_review"
    assert result.output is None
    review = result.invocation("qa.evaluate/answer[model=a,prompt=p2]")
    assert review.status == "needs_review"
    assert review.conflict["inputs"] == ["question"]
    assert not review.conflict["source"]
    assert "input(s) question changed" in review.error
    assert "--fxtr-cache-conflict=overwrite" in review.error
    assert result.invocation("qa.evaluate/score[model=a,prompt=p2]").status == "skipped"
    assert len(result.conflicts) == 2
    assert not any("p2" in c for c in examples.CALLS)


def test_overwrite_reruns_and_keeps_history_that_can_be_restored():
    """Overwrite replaces the entry; the old one goes to the history and can come back."""
    run(evaluate, qa_inputs())
    store = open_store(".fxtr")
    address = "qa.evaluate/answer[model=a,prompt=p2]"
    old = store.get_entry(address)
    result = run(
        evaluate,
        qa_inputs({"p1": "what is two plus two", "p2": "capital of italy"}),
        conflict="overwrite",
    )
    assert result.status == "succeeded"
    assert address in examples.CALLS
    new = store.get_entry(address)
    assert new.fingerprint != old.fingerprint
    history = store.history(address)
    assert [h["fingerprint"] for h in history] == [old.fingerprint]
    store.restore(address)
    assert store.get_entry(address).fingerprint == old.fingerprint
    assert [h["fingerprint"] for h in store.history(address)] == [new.fingerprint]
    examples.CALLS.clear()
    again = run(evaluate, qa_inputs())
    assert again.invocation(address).from_cache
    assert address not in examples.CALLS


def test_bad_conflict_policy_lists_the_valid_ones():
    """An unknown policy is a ValueError naming the choices."""
    with pytest.raises(
        ValueError, match="'keep' is not a valid conflict policy. Valid policies: review, overwrite"
    ):
        run(evaluate, qa_inputs(), conflict="keep")


def _drift_workflow(step_def):
    @workflow(name="t.drift")
    async def wf(context: WorkflowContext, x: ScalarHandle[int]) -> ScalarHandle[int]:
        return context.run_step("s", step_def, {"x": x})

    return wf


@step(name="t.drifting")
async def drifting_v1(context: StepContext, x: int) -> int:
    return x + 1


@step(name="t.drifting")
async def drifting_v2(context: StepContext, x: int) -> int:
    return x + 2


@step(name="t.drifting")
async def drifting_v1_reformatted(context: StepContext, x: int) -> int:
    """A docstring and a comment do not change the code."""
    # comment
    return x + 1


@step(name="t.drifting", version="2")
async def drifting_v3(context: StepContext, x: int) -> int:
    return x + 3


def test_code_drift_goes_through_review():
    """A step whose source changed while its inputs did not needs review."""
    run(_drift_workflow(drifting_v1), {"x": 1})
    result = run(_drift_workflow(drifting_v2), {"x": 1})
    assert result.status == "needs_review"
    inv = result.invocations[0]
    assert inv.conflict["source"] is True and inv.conflict["inputs"] == []
    assert "code drift" in inv.error


def test_formatting_comments_and_docstrings_are_not_drift():
    """The normalized source ignores layout, comments and the docstring."""
    assert drifting_v1.source_hash == drifting_v1_reformatted.source_hash
    run(_drift_workflow(drifting_v1), {"x": 1})
    result = run(_drift_workflow(drifting_v1_reformatted), {"x": 1})
    assert result.status == "succeeded" and result.invocations[0].from_cache


def test_version_bump_reruns_without_review_and_keeps_history():
    """A changed version= recomputes on purpose; the old entry goes to the history."""
    run(_drift_workflow(drifting_v1), {"x": 1})
    result = run(_drift_workflow(drifting_v3), {"x": 1})
    assert result.status == "succeeded"
    assert result.output.item() == 4
    address = "t.drift/s"
    assert len(open_store(".fxtr").history(address)) == 1


@step(name="t.versioned", version="1")
async def versioned_v1(context: StepContext, x: int) -> int:
    return x + 1


@step(name="t.versioned", version="1")
async def versioned_v1_refactored(context: StepContext, x: int) -> int:
    one = 1  # a refactor that keeps the results: the version says so
    return x + one


@step(name="t.versioned", version="2")
async def versioned_v2(context: StepContext, x: int) -> int:
    return x + 10


def test_a_refactor_that_keeps_the_version_keeps_the_cache():
    """With version=, the version stands for the code in the fingerprint (DESIGN §1): a
    changed body under the same version is served from the cache, no review; a new version
    recomputes on purpose, without review."""
    assert versioned_v1.source_hash != versioned_v1_refactored.source_hash
    assert run(_drift_workflow(versioned_v1), {"x": 1}).output.item() == 2
    again = run(_drift_workflow(versioned_v1_refactored), {"x": 1})
    assert again.status == "succeeded" and again.invocations[0].from_cache
    bumped = run(_drift_workflow(versioned_v2), {"x": 1})
    assert bumped.status == "succeeded" and not bumped.invocations[0].from_cache
    assert bumped.output.item() == 11


def test_an_entry_of_a_versioned_step_written_with_its_source_in_the_fingerprint_is_served():
    """A store written before the version stood for the code (the fingerprint then hashed the
    source too) serves the same version and inputs, instead of sending them to review."""
    import hashlib

    from fxtr.store import Batch, CacheEntry

    first = run(_drift_workflow(versioned_v1), {"x": 1})
    store = open_store(".fxtr")
    entry = store.get_entry("t.drift/s")
    old_fp = hashlib.sha256(b"as an earlier fxtr computed it").hexdigest()
    old = CacheEntry(old_fp, entry.version, entry.result, entry.usage, entry.meta, code=entry.code)
    store.clear_cache()  # the address holds only the entry written the old way
    store.write(Batch(entries={"t.drift/s": old.to_text()}))
    store.close()
    assert first.output.item() == 2
    again = run(_drift_workflow(versioned_v1_refactored), {"x": 1})
    assert again.status == "succeeded" and again.invocations[0].from_cache


RACE_SCRIPT = textwrap.dedent(
    """
    import asyncio, os, sys, time
    from fxtr import ScalarHandle, StepContext, WorkflowContext, run, step, workflow

    @step(name="race.slow")
    async def slow(context: StepContext, x: int) -> int:
        with open(sys.argv[1], "a") as f:
            f.write(f"{os.getpid()}\\n")
        await asyncio.sleep(0.6)
        return x * 2

    @workflow(name="race.wf")
    async def wf(context: WorkflowContext, x: ScalarHandle[int]) -> ScalarHandle[int]:
        return context.run_step("s", slow, {"x": x})

    while time.time() < float(sys.argv[2]):
        time.sleep(0.005)
    result = run(wf, {"x": 21}, store=sys.argv[3])
    print(result.status, result.output.item(), result.invocations[0].from_cache)
    """
)


def test_two_processes_reaching_one_address_run_it_once(tmp_path):
    """Two processes launched at once on the same address run the step once."""
    import time

    script = tmp_path / "race.py"
    script.write_text(RACE_SCRIPT)
    runs = tmp_path / "runs.txt"
    start = str(time.time() + 1.5)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(runs), start, str(tmp_path / "store")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    lines = sorted(o[0].split() for o in outs)
    assert [line[:2] for line in lines] == [["succeeded", "42"], ["succeeded", "42"]]
    assert sorted(line[2] for line in lines) == ["False", "True"]
    assert len(runs.read_text().splitlines()) == 1


def _put_claim(store, address, holder, host, pid, lease):
    """A claim row as another process would have left it (lease in seconds from now)."""
    import time

    with sqlite3.connect(store.path / "cache" / "cache.db") as db:
        db.execute(
            "INSERT INTO FxtrClaims (address, holder, host, pid, expires) VALUES (?, ?, ?, ?, ?)",
            (address, holder, host, pid, time.time() + lease),
        )


def _dead_pid() -> int:
    """The pid of a process that has ended."""
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(dead.stdout)


def test_claim_of_a_dead_holder_is_taken_over(tmp_path):
    """A claim left by a process that is gone does not block the next run."""
    store = open_store(tmp_path / "s")
    _put_claim(store, "t.drift/s", "gone", __import__("socket").gethostname(), _dead_pid(), 300)
    result = run(_drift_workflow(drifting_v1), {"x": 1}, store=store)
    assert result.status == "succeeded"


def test_expired_lease_is_taken_over(tmp_path):
    """A claim whose lease expired is free."""
    store = open_store(tmp_path / "s")
    _put_claim(store, "a", "other", "elsewhere", 1, -1)
    assert store.claim(["a"], "me", 10) == {"a": None}
    assert store.claim(["a"], "third", 10) == {"a": "me"}


def test_claims_of_a_batch_are_won_lost_and_taken_over_apart(tmp_path):
    """One claim call over many addresses: free ones won, live ones of others lost, a dead
    holder's and an expired lease taken over, this holder's own kept; release frees them."""
    import socket

    store = open_store(tmp_path / "s")
    _put_claim(store, "live", "other", "elsewhere", 1, 300)
    _put_claim(store, "dead", "gone", socket.gethostname(), _dead_pid(), 300)
    _put_claim(store, "expired", "other", "elsewhere", 1, -1)
    assert store.claim(["mine"], "me", 10) == {"mine": None}
    addresses = [f"free{i}" for i in range(1200)] + ["live", "dead", "expired", "mine"]
    got = store.claim(addresses, "me", 10)
    assert got == {**dict.fromkeys(addresses), "live": "other"}
    assert store.claim(["dead", "expired", "free7"], "third", 10) == dict.fromkeys(
        ["dead", "expired", "free7"], "me"
    )
    assert store.volume()["claims"] == 1204  # 1,203 of "me" and "live"
    store.release([a for a in addresses if a != "live"])
    assert store.volume()["claims"] == 1  # "live" is the other holder's
    assert store.claim(["free7"], "third", 10) == {"free7": None}


def test_store_is_created_where_asked(tmp_path):
    """The default store is .fxtr in the working directory."""
    run(_drift_workflow(drifting_v1), {"x": 1})
    assert Path(".fxtr/cache").is_dir()


@step(name="t.big")
async def big(context: StepContext, x: int) -> str:
    return "y" * 100_000 + str(x)


@workflow(name="t.big_wf")
async def big_wf(context: WorkflowContext, x: ScalarHandle[int]) -> ScalarHandle[str]:
    return context.run_step("b", big, {"x": x})


def test_large_results_stored_as_files_are_read_back():
    """A result over diskcache's inline size (kept in a file) is served from the cache."""
    first = run(big_wf, {"x": 7})
    second = run(big_wf, {"x": 7})
    assert second.invocations[0].from_cache
    assert second.output.item() == first.output.item() == "y" * 100_000 + "7"


def test_bulk_read_falls_back_to_per_key_gets(monkeypatch):
    """If diskcache's internals change, entries are still read, one get per key."""
    import sqlite3

    run(_drift_workflow(drifting_v1), {"x": 1})
    store = open_store(".fxtr")
    original = type(store.cache)._sql

    def changed_schema(self):
        execute = original.fget(self)

        def sql(statement, *args):
            if "key IN (" in statement:
                raise sqlite3.OperationalError("no such column: key")
            return execute(statement, *args)

        return sql

    monkeypatch.setattr(type(store.cache), "_sql", property(changed_schema))
    entries = store.get_entries(["t.drift/s", "nope"])
    assert list(entries) == ["t.drift/s"] and entries["t.drift/s"].result == "2"


@step(name="cache.roles")
async def answered_and_judged(context: StepContext, q: str) -> str:
    from fxtr.models import ContentText, MockModelAPI, ModelRequest, UserMessage
    from fxtr.tracing._recorder import call_role

    request = ModelRequest(context=(UserMessage(content=(ContentText(text=q),)),))
    await MockModelAPI("gpt-4o-mini", "an answer of some words").generate(request)
    token = call_role.set("judge")
    try:
        for _ in range(2):
            await MockModelAPI("gpt-4o", "yes").generate(request)
    finally:
        call_role.reset(token)
    return "ok"


@workflow(name="cache.roles_wf")
async def roles_wf(context: WorkflowContext, q: ScalarHandle[str]) -> ScalarHandle[str]:
    return context.run_step("roles", answered_and_judged, {"q": q})


def test_cost_per_role_is_stored_and_served_from_the_cache():
    """Calls per role (subject / judge) are on the invocation, in the stored entry and record,
    and come back unchanged on a cache hit (so "saved by cache" can be told per role)."""
    first = run(roles_wf, {"q": "What is the capital of France?"})
    (inv,) = first.invocations
    assert not inv.from_cache and set(inv.cost_by_role) == {"subject", "judge"}
    assert inv.cost_by_role["subject"]["calls"] == 1 and inv.cost_by_role["judge"]["calls"] == 2
    for table in (inv.cost_by_role, inv.cost_by_model):  # the two tables add up to the same
        assert sum(r["calls"] for r in table.values()) == inv.calls == 3
        assert sum(r["input_tokens"] for r in table.values()) == inv.input_tokens
        assert sum(r["usd"] for r in table.values()) == pytest.approx(inv.cost_usd)
    assert inv.cost_by_role["judge"] == inv.cost_by_model["gpt-4o"]
    second = run(roles_wf, {"q": "What is the capital of France?"})
    (again,) = second.invocations
    assert again.from_cache and again.cost_by_role == inv.cost_by_role
    store = open_store(".fxtr")
    entry = store.get_entry(inv.address)
    assert entry is not None and entry.usage is not None
    assert entry.usage["by_role"] == inv.cost_by_role
    (recorded,) = store.job_invocations(first.job_id).values()
    assert recorded["cost_by_role"] == inv.cost_by_role
    store.close()
