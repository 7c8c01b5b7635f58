"""Big evals (issue 25): the plan is a stream, a resume reads what it needs, listing is cheap."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fxtr import Array, ArrayHandle, StepContext, WorkflowContext, launch, resume, step, workflow
from fxtr.experiment._stream import STREAM_CHUNK, STREAM_PUMPS
from fxtr.store import Batch, open_store

N = 4 * STREAM_CHUNK * STREAM_PUMPS // 2
"""Invocations of the test job: more than the chunks in flight at once."""
SEEN: dict[str, Any] = {}


@step(name="big.double")
async def double(context: StepContext, x: int) -> int:
    if "claims" not in SEEN:
        # what was claimed (planned and resolved) when the first body started
        SEEN["claims"] = open_store(SEEN["store"]).volume()["claims"]
        SEEN["read"] = len(SEEN.get("addresses", ()))
    SEEN.setdefault("ran", []).append(x)
    if x in SEEN.get("fail", ()):
        msg = f"key {x} fails"
        raise ValueError(msg)
    return 2 * x


@workflow(name="big.wf")
async def big(
    context: WorkflowContext, xs: Annotated[ArrayHandle[int], "[key: int]"]
) -> Annotated[ArrayHandle[int], "[key: int]"]:
    return context.run_step("double", double, {"x": xs}, map_over=["key"])


def _inputs(n: int = N) -> dict[str, Any]:
    return {"xs": Array.from_mapping({i: i for i in range(n)}, dims=["key"], value_type=int)}


class Watched:
    """The store, with the invocation records the engine reads noted (nothing else changed)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.whole_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def job_invocations(self, job_id: str) -> dict[str, dict[str, Any]]:
        self.whole_reads += 1
        return self._store.job_invocations(job_id)  # type: ignore[no-any-return]

    def job_invocations_at(self, job_id: str, addresses: list[str], **kw: Any) -> Any:
        SEEN.setdefault("addresses", []).extend(addresses)
        return self._store.job_invocations_at(job_id, addresses, **kw)


def test_a_large_map_starts_its_first_body_before_it_is_all_planned(tmp_path):
    """The first body runs when a few chunks are claimed, not every invocation."""
    SEEN.clear()
    SEEN["store"] = str(tmp_path / "s")
    result = asyncio.run(launch(big, _inputs(), store=SEEN["store"]))
    assert result.status == "succeeded"
    assert len(result.invocations) == N
    assert 0 < SEEN["claims"] <= STREAM_CHUNK * STREAM_PUMPS < N
    assert result.output is not None
    assert result.output.to_dict() == {i: 2 * i for i in range(N)}


def test_a_resume_reads_a_chunk_of_the_record_then_reruns_the_failed(tmp_path):
    """Resume reads records chunk by chunk, never the whole record, and reruns only the failed."""
    SEEN.clear()
    SEEN["store"] = str(tmp_path / "s")
    failing = set(range(0, N, 97))
    SEEN["fail"] = failing
    first = asyncio.run(launch(big, _inputs(), store=SEEN["store"]))
    assert first.status == "failed"
    store = open_store(SEEN["store"])
    unfinished = store.job_unfinished(first.job_id)
    assert sorted(unfinished) == sorted(f"big.wf/double[key={i}]" for i in failing)
    assert {r["status"] for r in unfinished.values()} == {"failed"}
    SEEN.clear()
    SEEN["store"] = str(tmp_path / "s")
    watched = Watched(store)
    second = asyncio.run(resume(first.job_id, store=watched, workflow=big))
    assert second.status == "succeeded" and second.attempt == 2
    assert sorted(SEEN["ran"]) == sorted(failing)
    assert watched.whole_reads == 0
    assert SEEN["read"] <= STREAM_CHUNK * STREAM_PUMPS < N  # read before the first re-run
    served = [i for i in second.invocations if i.from_cache]
    assert len(served) == N - len(failing)
    assert all(i.attempt == 2 for i in second.invocations)
    assert second.output is not None
    assert second.output.to_dict() == {i: 2 * i for i in range(N)}
    assert store.job_unfinished(first.job_id) == {}


def test_records_of_a_store_written_before_the_table_are_still_read(tmp_path):
    """Old stores kept invocation records as chunks in the cache: read, and resumable."""
    SEEN.clear()
    SEEN["store"] = str(tmp_path / "s")
    SEEN["fail"] = {3}
    first = asyncio.run(launch(big, _inputs(10), store=SEEN["store"]))
    store = open_store(SEEN["store"])
    records = list(store.job_invocations(first.job_id).values())
    # rewrite them as fxtr wrote them before FxtrInvocations: chunks under i|JOB|SEQ
    store.cache._sql("DELETE FROM FxtrInvocations")
    store.cache.set(f"i|{first.job_id}|0", json.dumps(records[:5]))
    store.cache.set(f"i|{first.job_id}|1", json.dumps(records[5:]))
    store.cache.set(f"s|{first.job_id}", 2)
    assert len(store.job_invocations(first.job_id)) == 10
    assert list(store.job_unfinished(first.job_id)) == ["big.wf/double[key=3]"]
    found = store.job_invocations_at(
        first.job_id, ["big.wf/double[key=3]", "big.wf/double[key=4]"], status="succeeded"
    )
    assert list(found) == ["big.wf/double[key=4]"]
    SEEN.clear()
    SEEN["store"] = str(tmp_path / "s")
    second = asyncio.run(resume(first.job_id, store=SEEN["store"], workflow=big))
    assert second.status == "succeeded"
    assert SEEN["ran"] == [3]
    assert store.job_unfinished(first.job_id) == {}


def test_finished_records_share_their_empty_containers(tmp_path):
    """Records that log, warn and call nothing hold no empty lists and dicts of their own."""
    SEEN.clear()
    SEEN["store"] = str(tmp_path / "s")
    result = asyncio.run(launch(big, _inputs(20), store=SEEN["store"]))
    a, b = result.invocations[:2]
    assert a.logs == [] and a.cost_by_model == {} and a.model_calls == []
    assert a.logs is b.logs and a.cost_by_model is b.cost_by_model and a.changed is b.changed
    assert json.dumps(a.to_json())  # still a JSON-able record
    try:
        a.logs.append("late")
    except TypeError as exc:
        assert "assign a new one" in str(exc)
    else:
        raise AssertionError("a shared empty list was changed")
    assert b.logs == []


def test_a_resume_writes_only_the_inputs_it_reruns(tmp_path):
    """Inputs of served invocations were stored with their records: a resume writes only
    the inputs of what it reruns."""
    SEEN.clear()
    SEEN["store"] = str(tmp_path / "s")
    SEEN["fail"] = {5}
    first = asyncio.run(launch(big, _inputs(50), store=SEEN["store"]))
    assert first.status == "failed"
    written: list[str] = []

    class Counting(Watched):
        def write(self, batch: Batch) -> None:
            written.extend(batch.values)
            self._store.write(batch)

    SEEN.clear()
    SEEN["store"] = str(tmp_path / "s")
    second = asyncio.run(
        resume(first.job_id, store=Counting(open_store(SEEN["store"])), workflow=big)
    )
    assert second.status == "succeeded"
    (rerun,) = [i for i in second.invocations if not i.from_cache]
    fp = rerun.input_fingerprints["x"]
    assert written == [fp]
    assert open_store(SEEN["store"]).get_value(fp) == "5"


def _without_summary(view: Any) -> Any:
    from fxtr.report import JobView

    record = json.loads(json.dumps(view.record))
    for attempt in record["attempts"]:
        attempt.pop("summary", None)
    return JobView(view.job_id, record, store=view.store)


def test_the_summary_a_job_keeps_gives_what_its_records_give(tmp_path):
    """``fxtr jobs`` rows and ``fxtr show`` trees from the summary equal those from the records."""
    from fxtr.report import load_job, operation_graph
    from fxtr.report._views import job_row
    from tests import examples
    from tests.viewer_jobs import make_eval_job, make_job

    store = open_store(tmp_path / "s")
    jobs = [make_job(store), make_eval_job(store, n=4, models=("large", "small"), samples=2)]
    examples.FAIL.add("capital of france")
    failed = asyncio.run(launch(examples.evaluate, examples.qa_inputs(), store=store))
    examples.FAIL.clear()
    jobs += [failed, asyncio.run(resume(failed.job_id, store=store))]
    for job in jobs:
        view = load_job(store, job.job_id)
        assert view.summary is not None
        plain = _without_summary(view)
        assert plain.summary is None
        row, expected = job_row(view), job_row(plain)
        assert row == expected
        graph, expected_graph = operation_graph(view), operation_graph(plain)
        assert graph == expected_graph
    tokens = job_row(load_job(store, jobs[1].job_id))["tokens"]
    assert tokens > 0  # the eval job's model calls are counted, not only zeros
    resumed = job_row(load_job(store, failed.job_id))
    assert resumed["cached"] > 0 and resumed["failed"] == 0


def test_listing_jobs_reads_no_invocation_record(tmp_path):
    """A row and a tree of a finished job come from its record; failures from the index."""
    from fxtr.report import job_row, operation_graph, view_of

    SEEN.clear()
    SEEN["store"] = str(tmp_path / "s")
    SEEN["fail"] = {4}
    job = asyncio.run(launch(big, _inputs(30), store=SEEN["store"]))
    watched = Watched(open_store(SEEN["store"]))
    view = view_of(watched, watched.get_job(job.job_id))
    row = job_row(view)
    graph = operation_graph(view)
    assert (row["ran"], row["failed"]) == (30, 1)
    (node,) = [n for n in graph["nodes"] if n["kind"] == "step"]
    assert node["counts"] == {"succeeded": 29, "failed": 1}
    assert list(view.unfinished()) == ["big.wf/double[key=4]"]
    assert watched.whole_reads == 0


def test_the_viewers_first_screen_reads_no_succeeded_record(tmp_path):
    """The job's head, its graph and its failed invocations: record, summary, status index."""
    from fxtr.cli._server import Viewer

    SEEN.clear()
    SEEN["store"] = str(tmp_path / "s")
    SEEN["fail"] = {4, 9}
    job = asyncio.run(launch(big, _inputs(40), store=SEEN["store"]))
    watched = Watched(open_store(SEEN["store"]))
    viewer = Viewer(watched)
    (row,) = viewer.jobs()
    head = viewer.route(f"/api/jobs/{job.job_id}", {})
    graph = viewer.route(f"/api/jobs/{job.job_id}/graph", {})
    page = viewer.route(
        f"/api/jobs/{job.job_id}/invocations", {"op": ["big.wf/double"], "status": ["failed"]}
    )
    assert watched.whole_reads == 0
    assert row["failed"] == 2 and head["status"] == "failed"
    assert graph["row"]["ran"] == 40
    assert [i["address"] for i in page["items"]] == [
        "big.wf/double[key=4]",
        "big.wf/double[key=9]",
    ]
    everything = viewer.route(f"/api/jobs/{job.job_id}/invocations", {})
    assert everything["total"] == 40 and watched.whole_reads == 1  # all of them, when asked
