"""DESIGN §19: project arrays kept in the store, edited by rows, frozen into snapshots (issue 40).

Every test of the store's side runs on both stores: a directory (diskcache) and a database of
a throwaway PostgreSQL cluster.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated

import pytest

from fxtr import ArrayHandle, StepContext, WorkflowContext, resume, run, step, workflow
from fxtr.arrays import (
    ProjectArrayError,
    diff,
    drop_array,
    get_snapshot,
    list_arrays,
    open_array,
    parse_ref,
)
from fxtr.evals import Case, load_cases
from fxtr.experiment._encoding import encode_text, fingerprint_text
from fxtr.store import open_store

RAN: list[str] = []


@step(name="parrays.length")
async def length(context: StepContext, text: str) -> int:
    RAN.append(text)
    return len(text)


@workflow(name="parrays.lengths")
async def lengths(
    context: WorkflowContext, texts: Annotated[ArrayHandle[str], "[case: str]"]
) -> Annotated[ArrayHandle[int], "[case: str]"]:
    return context.run_step("length", length, {"text": texts}, map_over=["case"])


@pytest.fixture(autouse=True)
def _clear_ran():
    RAN.clear()


@pytest.fixture(params=["disk", "postgres"])
def location(request, tmp_path):
    """A fresh, empty store of each kind: a directory, or a new database."""
    if request.param == "disk":
        return str(tmp_path / "store")
    from tests.pgserver import fresh_database

    admin = request.getfixturevalue("postgres_server")
    name = "pa_" + request.node.name.lower().replace("[", "_").replace("]", "").replace("-", "_")
    return fresh_database(admin, name[:60])


def test_rows_are_edited_by_key_and_keep_the_order_they_were_added_in(location):
    qa = open_array(location, "qa", dims="[case: str]", value_type=str)
    assert qa.upsert({"b": "bee", "a": "ay"}) == 2
    assert qa.upsert([("c", "sea"), ("a", "AY")]) == 2
    assert qa.upsert({"c": "sea"}) == 0  # the value it has: nothing changes
    assert qa.rows() == [(("b",), "bee"), (("a",), "AY"), (("c",), "sea")]
    assert qa.delete(["b", "missing"]) == 1
    assert qa.rows() == [(("a",), "AY"), (("c",), "sea")]
    assert qa.replace({"c": "sea", "d": "dee"}) == 2  # a removed, d added
    assert qa.rows() == [(("c",), "sea"), (("d",), "dee")]
    info = qa.info()
    assert (info.rows, info.version, info.value_type) == (2, 4, "str")
    # another handle on the same store sees the same rows
    assert open_array(location, "qa").rows() == qa.rows()


def test_snapshots_are_numbered_and_their_rows_never_change(location):
    qa = open_array(location, "qa", dims="[case: str]", value_type=str)
    qa.upsert({"a": "x", "b": "yy"})
    first = qa.snapshot()
    assert (first.ref, first.rows) == ("qa@1", 2)
    assert qa.snapshot() == first  # nothing changed: the latest, no new number
    qa.upsert({"b": "zzz", "c": "w"})
    qa.delete(["a"])
    second = qa.snapshot()
    assert second.ref == "qa@2"
    # the first snapshot still holds its rows, read back from the store
    again = get_snapshot(location, "qa@1")
    assert again.array().to_dict() == {"a": "x", "b": "yy"}
    assert get_snapshot(location, "qa@latest") == second == get_snapshot(location, "qa")
    assert second.array().to_dict() == {"b": "zzz", "c": "w"}
    # the digest is the array's fingerprint, computed independently
    assert first.digest == fingerprint_text(encode_text(again.array()))
    d = diff(first, second)
    assert (d.added, d.removed, d.changed) == ([("c",)], [("a",)], [("b",)])
    # an edit that restores the latest snapshot's rows makes no new one
    qa.upsert({"c": "x"})
    qa.upsert({"c": "w"})
    assert qa.snapshot() == second
    assert [s.ref for s in qa.snapshots()] == ["qa@1", "qa@2"]
    (info,) = list_arrays(location)
    assert (info.name, info.rows, info.snapshots) == ("qa", 2, 2)


def test_types_dims_and_missing_snapshots_are_refused_by_name(location):
    qa = open_array(location, "qa", dims="[case: str]", value_type=str)
    with pytest.raises(TypeError, match=r"value at 'a' is int 3.*holds str values"):
        qa.upsert({"a": 3})
    with pytest.raises(TypeError, match="keys are str"):
        qa.upsert({7: "x"})
    with pytest.raises(ProjectArrayError, match=r"has dimensions \[case: str\], not \[id: str\]"):
        open_array(location, "qa", dims="[id: str]")
    with pytest.raises(ProjectArrayError, match="holds str values, not int"):
        open_array(location, "qa", value_type=int)
    with pytest.raises(ProjectArrayError, match="no project array 'other'.*Create it"):
        open_array(location, "other")
    with pytest.raises(ProjectArrayError, match="no snapshot 'qa@1': it has no snapshot yet"):
        get_snapshot(location, "qa@1")
    qa.upsert({"a": "x"})
    qa.snapshot()
    with pytest.raises(ProjectArrayError, match="its snapshots are 1"):
        get_snapshot(location, "qa@4")
    grid = open_array(location, "grid", dims="[model: str, case: str]", value_type=float)
    grid.upsert({("m1", "a"): 1.0, ("m1", "b"): 0.5, ("m2", "a"): 0.0})
    with pytest.raises(ProjectArrayError, match="cannot be frozen.*1 combination"):
        grid.snapshot()
    grid.upsert({("m2", "b"): 1.0})
    assert grid.snapshot().array().sel(model="m2").to_dict() == {"a": 0.0, "b": 1.0}


def test_a_dropped_array_keeps_its_snapshots(location):
    qa = open_array(location, "qa", dims="[case: str]", value_type=str)
    qa.upsert({"a": "x"})
    first = qa.snapshot()
    assert drop_array(location, "qa") and not drop_array(location, "qa")
    assert list_arrays(location) == []
    with pytest.raises(ProjectArrayError, match="no project array 'qa'"):
        open_array(location, "qa")
    assert get_snapshot(location, "qa@1").array().to_dict() == {"a": "x"}
    again = open_array(location, "qa", dims="[case: str]", value_type=str)
    assert again.rows() == []
    again.upsert({"b": "y"})
    assert again.snapshot().ref == "qa@2" and get_snapshot(location, "qa@1") == first


def test_refs_parse():
    assert parse_ref("qa@3") == ("qa", 3)
    assert parse_ref("qa@latest") == parse_ref("qa") == ("qa", None)
    with pytest.raises(ValueError, match="NAME@N"):
        parse_ref("qa@three")


def test_a_job_over_a_snapshot_records_it_and_reruns_only_what_a_new_snapshot_changed(location):
    qa = open_array(location, "qa", dims="[case: str]", value_type=str)
    qa.upsert({"a": "x", "b": "yy"})
    first = qa.snapshot()
    job = run(lengths, {"texts": first}, store=location)
    assert job.status == "succeeded" and job.output.to_dict() == {"a": 1, "b": 2}
    record = open_store(location).get_job(job.job_id)
    assert record["snapshots"] == {"texts": {"array": "qa", "snapshot": 1, "digest": first.digest}}
    # the whole array's fingerprint, as the record keeps the input, is the snapshot's digest
    assert fingerprint_text(record["inputs"]["texts"]) == first.digest
    qa.upsert({"b": "changed", "c": "new"})  # edited, not snapshotted: snapshot 1 is unchanged
    again = run(lengths, {"texts": get_snapshot(location, "qa@1")}, store=location)
    assert again.output.to_dict() == {"a": 1, "b": 2}
    assert all(i.from_cache for i in again.invocations) and RAN == ["x", "yy"]
    second = qa.snapshot()
    later = run(lengths, {"texts": second.array()}, store=location, conflict="overwrite")
    assert later.output.to_dict() == {"a": 1, "b": 7, "c": 3}
    assert RAN == ["x", "yy", "changed", "new"]  # only the changed and the new row ran
    assert open_store(location).get_job(later.job_id)["snapshots"]["texts"]["snapshot"] == 2


def test_anyone_with_the_store_reproduces_the_job_after_the_array_changed(tmp_path):
    """Resuming reads the job's inputs from its record: the array's later edits do not matter."""
    store = str(tmp_path / "store")
    qa = open_array(store, "qa", dims="[case: str]", value_type=str)
    qa.upsert({"a": "x", "b": "yy"})
    job = run(lengths, {"texts": qa.snapshot()}, store=store)
    qa.replace({"z": "other"})
    qa.snapshot()
    again = asyncio.run(resume(job.job_id, workflow=lengths, store=store))
    assert again.output.to_dict() == {"a": 1, "b": 2}
    # from the record alone: the snapshot it names, checked against its digest, run afresh
    open_store(store).clear_cache()
    source = open_store(store).get_job(job.job_id)["snapshots"]["texts"]
    snap = get_snapshot(store, f"{source['array']}@{source['snapshot']}")
    assert snap.digest == source["digest"]
    rerun = run(lengths, {"texts": snap}, store=store)
    assert rerun.output.to_dict() == {"a": 1, "b": 2} and RAN == ["x", "yy", "x", "yy"]


def test_load_cases_reads_a_snapshot_of_records_or_cases(tmp_path):
    store = str(tmp_path / "store")
    rows = open_array(store, "qa", dims="[case: str]", value_type=dict)
    rows.upsert({"c1": {"question": "2+2?", "answer": "4", "level": 1}})
    rows.snapshot()
    (case,) = load_cases("array:qa@1", input="question", target="answer", store=store)
    assert case == Case(id="c1", input="2+2?", target="4", metadata={"level": 1})
    typed = open_array(store, "typed", dims="[case: str]", value_type=Case)
    typed.upsert({"k": Case(id="k", input="hi", target="hello")})
    typed.snapshot()
    assert load_cases("array:typed@latest", store=store) == [
        Case(id="k", input="hi", target="hello")
    ]
    with pytest.raises(ValueError, match="array:qa@1:1: no column 'input'"):
        load_cases("array:qa@1", store=store)


def _fxtr(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fxtr.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_fxtr_arrays_command(location, tmp_path):
    qa = open_array(location, "qa", dims="[case: str]", value_type=dict)
    qa.upsert({"c1": {"input": "2+2?"}, "c2": {"input": "capital of France?"}})
    qa.snapshot()
    qa.upsert({"c3": {"input": "new"}})
    qa.delete(["c1"])
    store = ("--store", location)
    out = _fxtr(tmp_path, "arrays", "list", *store)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[2].split()[:5] == ["qa", "[case:", "str]", "dict", "2"]
    out = _fxtr(tmp_path, "arrays", "show", "qa", *store)
    assert 'c3: {"input":"new"}' in out.stdout
    assert "latest qa@1 (edited since)" in out.stdout
    out = _fxtr(tmp_path, "arrays", "snapshot", "qa", *store)
    assert out.returncode == 0 and out.stdout.startswith("qa@2: 2 rows, digest ")
    out = _fxtr(tmp_path, "arrays", "snapshot", "qa", *store)
    assert "qa@2 already holds the current rows" in out.stdout
    out = _fxtr(tmp_path, "arrays", "show", "qa@1", *store)
    assert 'c1: {"input":"2+2?"}' in out.stdout and "c3" not in out.stdout
    out = _fxtr(tmp_path, "arrays", "diff", "qa@1", "qa@latest", *store)
    assert out.stdout.splitlines() == [
        "+ c3",
        "- c1",
        "qa@1 -> qa@2: 1 added, 1 removed, 0 changed",
    ]
    out = _fxtr(tmp_path, "arrays", "diff", "qa@1", "qa@2", "--json", *store)
    assert json.loads(out.stdout)["added"] == [["c3"]]
    out = _fxtr(tmp_path, "arrays", "show", "qa@9", *store)
    assert out.returncode == 1
    assert "no snapshot 'qa@9': its snapshots are 1, 2" in out.stderr


EVAL = textwrap.dedent(
    """
    import os
    from pathlib import Path

    import pytest

    from fxtr.evals import Model, evaluate, includes, load_cases, register_mock, user_text

    CALLS = Path(os.environ["ARRAY_CALLS"])

    def reply(request):
        with CALLS.open("a") as f:
            f.write(user_text(request) + "\\n")
        return "the answer is " + user_text(request)

    register_mock("echo", reply)
    CASES = load_cases(os.environ["ARRAY_REF"], input="question", target="answer")

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes()})
    @pytest.mark.parametrize("model", [Model("mock/echo")])
    @pytest.mark.parametrize("case", CASES)
    def test_qa(model, case, result):
        assert [score.value for score in result.values()] == [1.0]
    """
)


def test_an_eval_over_a_snapshot_changes_only_when_a_new_snapshot_is_taken(pytester, monkeypatch):
    """The user's side: pytest in a subprocess, the store edited between runs."""
    store = pytester.path / ".fxtr"
    qa = open_array(str(store), "qa", dims="[case: str]", value_type=dict)
    qa.upsert({f"c{i}": {"question": f"q{i}", "answer": f"q{i}"} for i in range(3)})
    qa.snapshot()
    calls = pytester.path / "calls.txt"
    monkeypatch.setenv("ARRAY_CALLS", str(calls))

    def run_eval(ref: str) -> tuple[dict, list[str]]:
        calls.write_text("")
        monkeypatch.setenv("ARRAY_REF", ref)
        result = pytester.runpytest_subprocess("--fxtr-report", "r.json", "-p", "no:cacheprovider")
        (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
        record = open_store(str(store)).get_job(job["job_id"])
        return {"outcomes": result.parseoutcomes(), "snapshots": record.get("snapshots")}, sorted(
            calls.read_text().split()
        )

    pytester.makepyfile(test_qa=EVAL)
    first, ran = run_eval("array:qa@latest")
    assert first["outcomes"]["passed"] == 3 and ran == ["q0", "q1", "q2"]
    assert first["snapshots"]["case"]["array"] == "qa"
    assert first["snapshots"]["case"]["snapshot"] == 1
    # the array is edited, but not snapshotted: the eval's rerun is unchanged, all cached
    qa.upsert({"c3": {"question": "q3", "answer": "q3"}})
    qa.delete(["c0"])
    again, ran = run_eval("array:qa@latest")
    assert again["outcomes"]["passed"] == 3 and ran == []
    # a new snapshot: the rerun has its rows, and runs only the new case
    qa.snapshot()
    later, ran = run_eval("array:qa@latest")
    assert later["outcomes"]["passed"] == 3 and ran == ["q3"]
    assert later["snapshots"]["case"]["snapshot"] == 2
    # a pinned snapshot never moves
    pinned, ran = run_eval("array:qa@1")
    assert pinned["outcomes"]["passed"] == 3 and ran == []
    assert pinned["snapshots"]["case"]["snapshot"] == 1


MARKER_EVAL = textwrap.dedent(
    """
    from typing import Annotated

    import pytest

    from fxtr import Array, ArrayHandle, StepContext, WorkflowContext, step, workflow
    from fxtr.arrays import get_snapshot

    @step(name="marker.count")
    async def count(context: StepContext, rows: Annotated[Array[str], "[case: str]"],
                    tag: str) -> int:
        return sum(len(v) for v in rows.values())

    @workflow(name="marker.wf")
    async def wf(context: WorkflowContext, tag: Annotated[ArrayHandle[str], "[t: str]"],
                 rows: Annotated[ArrayHandle[str], "[case: str]"]
                 ) -> Annotated[ArrayHandle[int], "[t: str]"]:
        return context.run_step("count", count, {"rows": rows, "tag": tag}, map_over=["t"])

    @pytest.mark.fxtr(wf, dims={"t": "tag"}, inputs={"rows": get_snapshot(".fxtr", "qa@1")})
    @pytest.mark.parametrize("tag", ["a", "b"])
    def test_rows(tag, result):
        assert result == 3
    """
)


def test_the_marker_takes_a_snapshot_among_its_inputs(pytester):
    store = pytester.path / ".fxtr"
    qa = open_array(str(store), "qa", dims="[case: str]", value_type=str)
    qa.upsert({"x": "a", "y": "bb"})
    snap = qa.snapshot()
    pytester.makepyfile(test_marker=MARKER_EVAL)
    result = pytester.runpytest_subprocess("--fxtr-report", "r.json", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    (job,) = json.loads((pytester.path / "r.json").read_text())["jobs"]
    record = open_store(str(store)).get_job(job["job_id"])
    assert record["snapshots"] == {"rows": {"array": "qa", "snapshot": 1, "digest": snap.digest}}


WRITER = textwrap.dedent(
    """
    import sys

    from fxtr.arrays import open_array

    location, worker = sys.argv[1], sys.argv[2]
    qa = open_array(location, "qa", dims="[case: str]", value_type=str)
    for i in range(15):
        qa.upsert({f"{worker}-{i}": f"row {i} of {worker}"})
        print(qa.snapshot().number)
    """
)


def test_processes_editing_and_snapshotting_at_once_lose_nothing(location, tmp_path):
    """Four processes upsert and snapshot at once: every row is kept, numbers never repeat."""
    open_array(location, "qa", dims="[case: str]", value_type=str)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), location, f"w{n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    qa = open_array(location, "qa")
    assert len(qa) == 60
    snaps = qa.snapshots()
    numbers = [s.number for s in snaps]
    assert numbers == list(range(1, len(snaps) + 1))
    # each snapshot holds more rows than the one before, and the last holds them all
    counts = [s.rows for s in snaps]
    assert counts == sorted(set(counts)) and counts[-1] == 60
    assert qa.snapshot() == snaps[-1]
    seen_by_each = [[int(n) for n in out.split()] for out, _ in outs]
    assert all(seen == sorted(seen) for seen in seen_by_each)
