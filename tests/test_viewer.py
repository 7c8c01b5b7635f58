"""The viewer's server and export, over HTTP: routes, security, escaping, scale."""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest

from fxtr import Array, run
from fxtr.cli._server import export_html, serve
from fxtr.store import open_store
from tests.viewer_jobs import XSS, make_job


@pytest.fixture
def viewer(tmp_path):
    store = open_store(tmp_path / "store")
    job = make_job(store)
    server, _ = serve(store, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    with httpx.Client(base_url=base, timeout=10) as client:
        yield client, job, store
    server.shutdown()
    server.server_close()


def test_pages_and_api(viewer):
    """The app, the jobs list, a job with its graph, a page of invocations, one invocation."""
    client, job, _ = viewer
    index = client.get("/")
    assert index.status_code == 200 and '<script src="/app.js">' in index.text
    assert "default-src 'none'" in index.headers["content-security-policy"]
    assert index.headers["x-content-type-options"] == "nosniff"
    assert "access-control-allow-origin" not in index.headers
    (row,) = client.get("/api/jobs").json()
    assert row["job_id"] == job.job_id and row["status"] == "failed" and row["failed"] == 1
    head = client.get(f"/api/jobs/{job.job_id}").json()
    assert head["job_id"] == job.job_id and head["evaluation"] is None and head["gate"] is None
    detail = client.get(f"/api/jobs/{job.job_id}/graph").json()
    (node,) = [n for n in detail["graph"]["nodes"] if n["id"] == "view.evaluate/judge"]
    assert node["counts"] == {"succeeded": 2, "failed": 1} and node["reasons"] == {"tool_error": 1}
    page = client.get(f"/api/jobs/{job.job_id}/invocations", params={"status": "failed"}).json()
    assert page["total"] == 1 and page["items"][0]["address"] == "view.evaluate/judge[case=broken]"
    inv = client.get(
        f"/api/jobs/{job.job_id}/invocation", params={"address": "view.evaluate/judge[case=broken]"}
    ).json()
    assert inv["reason"] == "tool_error" and "judge unreachable" in inv["error"]
    assert inv["logs"] == ["judged broken: looks fine"]
    assert inv["inputs"]["case"]["value"] == "broken"
    ok = client.get(
        f"/api/jobs/{job.job_id}/invocation", params={"address": "view.evaluate/judge[case=fine]"}
    ).json()
    assert ok["result"]["kind"] == "ref" and ok["result"]["entity"]["fields"]["case"] == "fine"


def test_records_are_escaped_in_json(viewer):
    """A step's <script> result is escaped as \\u003c... in what the server sends."""
    client, job, _ = viewer
    body = client.get(
        f"/api/jobs/{job.job_id}/invocation", params={"address": "view.evaluate/judge[case=xss]"}
    ).text
    assert "<script" not in body and "\\u003cscript" in body
    assert json.loads(body)["result"]["entity"]["fields"]["text"] == XSS


def test_security_host_methods_and_unknown_paths(viewer):
    """Non-loopback Host is refused; only GET and HEAD; unknown paths are 404."""
    client, job, _ = viewer
    assert client.get("/api/jobs", headers={"Host": "evil.example:80"}).status_code == 403
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        assert client.request(method, "/api/jobs").status_code == 405
    assert client.head("/").status_code == 200
    assert client.get("/../../etc/passwd").status_code == 404
    assert client.get("/api/jobs/nope").status_code == 404
    assert (
        client.get(f"/api/jobs/{job.job_id}/invocation", params={"address": "x"}).status_code == 404
    )


def test_export_is_self_contained_and_escaped(tmp_path):
    """The export has its data inline, a CSP that blocks the network, no external URL."""
    store = open_store(tmp_path / "store")
    job = make_job(store)
    html = export_html(store, job.job_id)
    assert 'http-equiv="Content-Security-Policy"' in html and "default-src 'none'" in html
    assert not re.search(r"(src|href)=\"https?://", html)
    assert "<script src=" not in html
    assert len(re.findall(r'<script type="application/json" id="inv-\d+">', html)) == 3
    assert XSS not in html and "\\u003cscript\\u003ealert" in html


@pytest.fixture
def big_job(tmp_path):
    from benchmarks.bench_engine import grid

    xs = Array.from_mapping({i: i for i in range(100)}, dims=["x"], value_type=int)
    ys = Array.from_mapping({i: i for i in range(100)}, dims=["y"], value_type=int)
    store = open_store(tmp_path / "big")
    return store, run(grid, {"xs": xs, "ys": ys}, store=store, verify=False, hermetic=False)


def test_ten_thousand_invocations_stay_responsive(big_job):
    """A 10,000-invocation job: one node per operation, pages of 200 rows, quick answers."""
    store, job = big_job
    server, _ = serve(store, "127.0.0.1", 0)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.server_address[1]}") as client:
            start = time.perf_counter()
            detail = client.get(f"/api/jobs/{job.job_id}/graph").json()
            page = client.get(
                f"/api/jobs/{job.job_id}/invocations",
                params={"op": "bench.grid/add", "offset": 9900},
            ).json()
            elapsed = time.perf_counter() - start
    finally:
        server.shutdown()
        server.server_close()
    assert len(detail["graph"]["nodes"]) == 2
    assert page["total"] == 10_000 and len(page["items"]) == 100
    assert elapsed < 5


def test_tracing_tasks_are_listed_and_shown(tmp_path):
    """A tracing Client's task recorded in the store has its page."""
    import asyncio

    from fxtr.models import MockModelAPI
    from fxtr.tracing import Client

    store_path = tmp_path / "store"
    client = Client({"m": MockModelAPI("gpt-4o-mini", "hi")}, store=store_path)

    async def go():
        with client.task("research") as t:
            await client.messages.create(messages=[{"role": "user", "content": "hello"}])
            try:
                with client.step("fetch"):
                    raise TimeoutError("slow")
            except TimeoutError:
                pass
        return t.task_id

    task_id = asyncio.run(go())
    server, _ = serve(open_store(store_path), "127.0.0.1", 0)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.server_address[1]}") as http:
            (task,) = http.get("/api/tasks").json()
            assert task["task_id"] == task_id and task["nodes"] == 3
            nodes = http.get(f"/api/tasks/{task_id}").json()["nodes"]
    finally:
        server.shutdown()
        server.server_close()
    assert [(n["kind"], n["name"], n["status"], n["reason"]) for n in nodes] == [
        ("task", "research", "succeeded", None),
        ("model_call", "gpt-4o-mini", "succeeded", None),
        ("step", "fetch", "failed", "tool_error"),
    ]


def test_graphs_over_300_operations_are_marked_for_the_tree_view():
    """A job with more operations than can be drawn says so; the page then shows a tree."""
    from fxtr.report import JobView, operation_graph

    ops = {
        "wf": [
            {"name": f"op{i}", "kind": "step", "callee": "s", "inputs": {}, "map_over": []}
            for i in range(301)
        ]
    }
    view = JobView(
        job_id="j",
        record={"workflow": "wf", "attempts": [{}]},
        invocations={},
        workflows=[{"address": "wf", "workflow": "wf", "status": "succeeded"}],
        ops=ops,
    )
    graph = operation_graph(view)
    assert graph["truncated"] and len(graph["nodes"]) == 302
    small = operation_graph(JobView("j", view.record, {}, view.workflows, {"wf": ops["wf"][:5]}))
    assert not small["truncated"]
