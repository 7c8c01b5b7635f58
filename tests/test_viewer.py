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
from tests.viewer_jobs import JUDGE_USAGE, XSS, make_job


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


# eval jobs: the results matrix, cells, comparisons ---------------------------------------


@pytest.fixture(scope="module")
def eval_store(tmp_path_factory):
    """A store with two real runs of one eval: A, then B (better on 'hard', worse on 'regress')."""
    from tests.viewer_jobs import make_eval_job

    store = open_store(tmp_path_factory.mktemp("evals") / "store")
    a = make_eval_job(store)
    b = make_eval_job(store, variant="better", baseline=a.job_id)
    server, _ = serve(store, "127.0.0.1", 0)
    with httpx.Client(base_url=f"http://127.0.0.1:{server.server_address[1]}", timeout=30) as c:
        yield c, store, a.job_id, b.job_id
    server.shutdown()
    server.server_close()


def expected_cells(store, job_id):
    """Each (case, model) cell's mean over its recorded samples, from the record itself."""
    out = {}
    for cell in store.get_job(job_id)["evaluation"]["cells"]:
        values = [v for v in cell["values"] if v is not None]
        mean = sum(values) / len(values) if values and cell["status"] == "ok" else None
        out[(cell["case"]["case"], cell["group"]["model"])] = (mean, len(values))
    return out


def rows_of(page):
    return [r["label"] for r in page["rows"]]


def test_eval_job_page_heads_with_its_results(eval_store):
    """The job's head names the eval, its gate, groups; the matrix has cases x models, k/n."""
    client, store, a, b = eval_store
    head = client.get(f"/api/jobs/{b}").json()
    assert head["gate"] == "gate failed" and head["evaluation"]["eval"].endswith("::test_res")
    assert head["evaluation"]["baseline"] == {"job_id": a, "source": "store"}
    assert [g["group"] for g in head["evaluation"]["groups"]] == [
        {"model": "small"},
        {"model": "large"},
    ]
    page = client.get(f"/api/jobs/{a}/matrix").json()
    assert [c["label"] for c in page["columns"]] == ["small", "large"]
    assert rows_of(page) == ["easy", "flaky", "hard", "regress", "boom", "xss"]
    assert page["binary"] is True
    expected = expected_cells(store, a)
    for row in page["rows"]:
        for column, cell in zip(page["columns"], row["cells"], strict=True):
            mean, n = expected[(row["label"], column["label"])]
            if mean is None:
                assert cell["missing"] and cell["text"] == "missing"
            else:
                assert cell["score"] == pytest.approx(mean)
                assert cell["text"] == f"{round(mean * n)}/{n}"
    (jobs_row,) = [r for r in client.get("/api/jobs").json() if r["job_id"] == a]
    assert jobs_row["gate"] == "gate failed" and jobs_row["eval"].endswith("::test_res")


def test_matrix_filters_and_comparison(eval_store):
    """failed, flaky, missing and (with a comparison) changed rows; counts for each."""
    client, store, a, b = eval_store
    url = f"/api/jobs/{b}/matrix"
    expected = expected_cells(store, b)
    failed = sorted({case for (case, _), (m, _) in expected.items() if m is not None and m < 0.8})
    page = client.get(url, params={"show": "failed"}).json()
    assert sorted(rows_of(page)) == failed and page["counts"]["failed"] == len(failed)
    assert rows_of(client.get(url, params={"show": "flaky"}).json()) == ["flaky"]
    assert rows_of(client.get(url, params={"show": "missing"}).json()) == ["boom"]
    no_baseline = client.get(url, params={"show": "changed"})
    assert no_baseline.status_code == 400 and "needs a comparison" in no_baseline.json()["error"]
    changed = client.get(url, params={"show": "changed", "compare": a[:7]}).json()
    before = expected_cells(store, a)
    assert sorted(rows_of(changed)) == sorted(
        {case for key, (m, _) in expected.items() if before[key][0] != m for case in [key[0]]}
    )
    (regress,) = [r for r in changed["rows"] if r["label"] == "regress"]
    assert [c["baseline"] for c in regress["cells"]] == ["2/2", "2/2"]
    assert [c["text"] for c in regress["cells"]] == ["0/2", "0/2"]
    assert rows_of(client.get(url, params={"q": "EAS"}).json()) == ["easy"]
    two = client.get(url, params={"offset": 4, "limit": 2}).json()
    assert rows_of(two) == ["boom", "xss"] and two["total"] == 6


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"offset": "abc"}, "offset must be a whole number of at least 0, got 'abc'"),
        ({"offset": "-1"}, "offset must be a whole number of at least 0, got '-1'"),
        ({"limit": "1e3"}, "limit must be a whole number of at least 0, got '1e3'"),
        ({"show": "bogus"}, "valid filters: failed, flaky, missing, changed"),
    ],
)
def test_bad_page_parameters_are_400s_with_a_message(eval_store, params, message):
    """Non-numeric or negative offset/limit and unknown filters are 400s that say why."""
    client, _, a, _ = eval_store
    for path in (f"/api/jobs/{a}/matrix", f"/api/jobs/{a}/invocations"):
        if "show" in params and path.endswith("invocations"):
            continue
        response = client.get(path, params=params)
        assert response.status_code == 400 and message in response.json()["error"]
        assert "default-src 'none'" in response.headers["content-security-policy"]


def test_a_cell_opens_its_invocations_and_conversations(eval_store):
    """A cell lists its answer and score invocations with the model's messages and reply."""
    client, _, a, _ = eval_store
    page = client.get(f"/api/jobs/{a}/matrix").json()
    (flaky,) = [r for r in page["rows"] if r["label"] == "flaky"]
    cell = client.get(f"/api/jobs/{a}/cell", params={"index": flaky["cells"][0]["index"]}).json()
    assert cell["case"] == {"case": "flaky"} and cell["group"] == {"model": "small"}
    assert cell["values"] == [1.0, 0.0]
    steps = [(i["step"], i["address"].rsplit("sample=", 1)[1]) for i in cell["invocations"]]
    assert steps == [("res.answer", "0]"), ("res.score", "0]"), ("res.answer", "1]"),
                     ("res.score", "1]")]  # fmt: skip
    calls = cell["invocations"][0]["model_calls"]
    assert [(c["model"], c["role"]) for c in calls] == [("small", "subject")]
    assert calls[0]["messages"] == [{"role": "user", "content": "flaky: a coin toss"}]
    assert calls[0]["reply"] == "RIGHT: flaky: a coin toss"
    assert calls[0]["cached_input_tokens"] == 0
    assert cell["invocations"][2]["model_calls"][0]["reply"] == "WRONG: flaky: a coin toss"
    (judge,) = cell["invocations"][1]["model_calls"]  # the score step's judge
    assert (judge["model"], judge["role"], judge["reply"]) == ("judge-mini", "judge", "RIGHT")
    assert judge["messages"] == [
        {"role": "system", "content": "Reply RIGHT or WRONG."},
        {"role": "user", "content": "RIGHT: flaky: a coin toss"},
    ]
    assert {k: judge[k] for k in JUDGE_USAGE} == JUDGE_USAGE
    assert cell["invocations"][3]["model_calls"][0]["reply"] == "WRONG"
    detail = client.get(
        f"/api/jobs/{a}/invocation", params={"address": cell["invocations"][1]["address"]}
    ).json()
    assert detail["model_calls"] == [judge]  # the invocation panel shows the same call
    assert cell["invocations"][1]["result"] == 1.0
    missing = client.get(f"/api/jobs/{a}/cell", params={"index": 9999})
    assert missing.status_code == 404 and "has no result cell 9999" in missing.json()["error"]
    assert client.get(f"/api/jobs/{a}/cell").status_code == 400


def test_a_result_with_markup_stays_data(eval_store):
    """The XSS case's messages and reply are escaped in what the server sends."""
    client, _, a, _ = eval_store
    page = client.get(f"/api/jobs/{a}/matrix", params={"q": "xss"}).json()
    index = page["rows"][0]["cells"][1]["index"]
    body = client.get(f"/api/jobs/{a}/cell", params={"index": index}).text
    assert "<script" not in body and "<img" not in body and "\\u003cscript" in body
    calls = json.loads(body)["invocations"][0]["model_calls"]
    assert XSS in calls[0]["reply"]


def test_comparison_route(eval_store):
    """/api/compare/A/B: per group the means, delta, flipped cases and verdict."""
    client, _, a, b = eval_store
    data = client.get(f"/api/compare/{a[:8]}/latest").json()
    assert data["a"]["job_id"] == a and data["b"]["job_id"] == b
    groups = {g["label"]: g for g in data["groups"]}
    assert groups["small"]["flipped"] == {"to_fail": ["regress"], "to_pass": ["hard"]}
    assert groups["large"]["flipped"] == {"to_fail": ["regress"], "to_pass": []}
    assert groups["large"]["delta"] == pytest.approx(-1 / 6)
    assert groups["large"]["n_paired"] == 6
    assert {g["verdict"] for g in groups.values()} == {"no significant change"}
    assert client.get(f"/api/compare/{a}/nope").status_code == 404
    assert client.get(f"/api/compare/{a}/{b}", params={"margin": "x"}).status_code == 400


def test_jobs_are_named_by_prefix_and_latest_in_urls(eval_store):
    """/api/jobs/latest and a unique prefix resolve; the app is served at /job/... pages."""
    client, _, a, b = eval_store
    assert client.get("/api/jobs/latest").json()["job_id"] == b
    assert client.get(f"/api/jobs/{a[:5]}/matrix").json()["job_id"] == a
    for page in (f"/job/{a[:5]}", f"/compare/{a}/{b}", "/job/latest"):
        response = client.get(page)
        assert response.status_code == 200 and '<script src="/app.js">' in response.text


def test_host_with_userinfo_and_error_pages(eval_store):
    """A Host with user info is refused; every error response has the security headers."""
    client, _, _, _ = eval_store
    port = client.base_url.port
    for host in (f"evil@127.0.0.1:{port}", f"127.0.0.1@evil.example:{port}", "127.0.0.1:x"):
        response = client.get("/api/jobs", headers={"Host": host})
        assert response.status_code == 403, host
    assert client.get("/api/jobs", headers={"Host": f"localhost:{port}"}).status_code == 200
    errors = [
        client.get("/nothing"),
        client.get("/api/jobs/nope"),
        client.post("/api/jobs"),
        client.get("/api/jobs", headers={"Host": "evil.example"}),
        client.request("BREW", "/api/jobs"),
    ]
    assert [r.status_code for r in errors] == [404, 404, 405, 403, 501]
    for response in errors:
        assert "default-src 'none'" in response.headers["content-security-policy"]
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "access-control-allow-origin" not in response.headers


def test_a_damaged_job_record_hides_no_other_job(tmp_path):
    """A job whose record is broken is listed as damaged; the others still open."""
    store = open_store(tmp_path / "store")
    job = make_job(store)
    store.put_job({"job_id": "broken", "workflow": "wf", "created_at": 1.0, "attempts": "??"})
    server, _ = serve(store, "127.0.0.1", 0)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.server_address[1]}") as client:
            rows = {r["job_id"]: r for r in client.get("/api/jobs").json()}
            assert rows["broken"]["status"] == "damaged" and rows[job.job_id]["failed"] == 1
            assert client.get(f"/api/jobs/{job.job_id}/graph").status_code == 200
    finally:
        server.shutdown()
        server.server_close()


def test_ten_thousand_case_eval_is_paged(tmp_path, capsys):
    """A 10,000-case eval job: the matrix comes in pages of 100 rows, filters count all rows."""
    from tests.viewer_jobs import make_eval_job

    store = open_store(tmp_path / "store")
    job = make_eval_job(store, n=10_000 - 6, models=("large",), samples=1)
    server, _ = serve(store, "127.0.0.1", 0)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.server_address[1]}") as client:
            start = time.perf_counter()
            head = client.get(f"/api/jobs/{job.job_id}").json()
            first = client.get(f"/api/jobs/{job.job_id}/matrix").json()
            first_screen = time.perf_counter() - start
            start = time.perf_counter()
            last = client.get(f"/api/jobs/{job.job_id}/matrix", params={"offset": 9_950}).json()
            next_page = time.perf_counter() - start
            missing = client.get(f"/api/jobs/{job.job_id}/matrix", params={"show": "missing"})
            cell = client.get(f"/api/jobs/{job.job_id}/cell", params={"index": 9_999}).json()
    finally:
        server.shutdown()
        server.server_close()
    assert head["evaluation"]["cells"] == 10_000
    assert first["total"] == 10_000 and len(first["rows"]) == 100
    assert len(last["rows"]) == 50 and last["rows"][-1]["label"] == "c09993"
    assert missing.json()["total"] == 0 and first["counts"]["flaky"] == 0
    assert cell["case"] == {"case": "c09993"} and len(cell["invocations"]) == 2
    with capsys.disabled():
        print(
            f"\n10,000-case eval: head + first matrix page {first_screen:.2f}s, "
            f"another page {next_page:.3f}s ({first_screen / max(next_page, 1e-6):.0f}x: the "
            "scored cells are kept)"
        )


@pytest.mark.filterwarnings("ignore:Skipped the damaged job record:RuntimeWarning")
def test_a_garbled_job_record_hides_no_other_job(tmp_path):
    """A record whose stored text is not JSON is left out; the jobs page and the others work."""
    store = open_store(tmp_path / "store")
    job = make_job(store)
    store.jobs.set("garbled", "{not json at all")  # a value damaged on disk
    server, _ = serve(store, "127.0.0.1", 0)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.server_address[1]}") as client:
            assert [r["job_id"] for r in client.get("/api/jobs").json()] == [job.job_id]
            assert client.get("/api/jobs/latest").json()["job_id"] == job.job_id
            damaged = client.get("/api/jobs/garbled")
            assert damaged.status_code == 500
            assert "The record of job garbled" in damaged.json()["error"]
            assert "default-src 'none'" in damaged.headers["content-security-policy"]
    finally:
        server.shutdown()
        server.server_close()


def test_the_jobs_page_lists_the_newest(tmp_path):
    """/api/jobs lists the newest 200 jobs, newest first; ?limit= asks for fewer or more."""
    store = open_store(tmp_path / "store")
    for i in range(205):
        store.put_job(
            {"job_id": f"j{i:03d}", "workflow": "wf", "created_at": float(i), "attempts": []}
        )
    server, _ = serve(store, "127.0.0.1", 0)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.server_address[1]}") as client:
            rows = client.get("/api/jobs").json()
            assert [r["job_id"] for r in rows] == [f"j{i:03d}" for i in range(204, 4, -1)]
            assert len(client.get("/api/jobs", params={"limit": 1000}).json()) == 205
            assert client.get("/api/jobs", params={"limit": "x"}).status_code == 400
    finally:
        server.shutdown()
        server.server_close()


def test_an_eval_export_carries_its_matrix_and_cells_escaped(eval_store):
    """The export of an eval job holds every cell's details in a block, with markup escaped."""
    _, store, a, _ = eval_store
    html = export_html(store, a)
    cells = len(store.get_job(a)["evaluation"]["cells"])
    assert len(re.findall(r'<script type="application/json" id="cell-\d+">', html)) == cells
    assert XSS not in html and "\\u003cscript\\u003ealert" in html
    data = json.loads(re.search(r'id="fxtr-data">(.*?)</script>', html, re.S).group(1))
    matrix = data["matrix"][a]
    assert matrix["total"] == 6 and len(matrix["rows"]) == 6


def test_keys_with_address_syntax_mid_address(tmp_path):
    """A child workflow mapped over keys holding '/', brackets, quotes: one node per operation,
    each with an existing parent; the op filter finds every invocation; each detail opens."""
    from fxtr.cli._server import Viewer
    from tests.viewer_jobs import HOSTILE_KEYS, make_hostile_job

    store = open_store(tmp_path / "store")
    job = make_hostile_job(store)
    viewer = Viewer(store)
    nodes = {n["id"]: n for n in viewer.graph(job.job_id)["graph"]["nodes"]}
    assert {k: n["parent"] for k, n in nodes.items()} == {
        "view.outer": None,
        "view.outer/inner": "view.outer",
        "view.outer/inner/work": "view.outer/inner",
    }
    assert nodes["view.outer/inner/work"]["counts"] == {"failed": len(HOSTILE_KEYS)}
    page = viewer.route(f"/api/jobs/{job.job_id}/invocations", {"op": ["view.outer/inner/work"]})
    assert page["total"] == len(HOSTILE_KEYS)
    for row in page["items"]:
        detail = viewer.route(f"/api/jobs/{job.job_id}/invocation", {"address": [row["address"]]})
        key = next(k for k in HOSTILE_KEYS if f"for key {k}" in detail["error"])
        assert row["address"] == f"view.outer/inner[case={json.dumps(key)}]/work"
    graph = job.graph
    ids = {n.id for n in graph.nodes}
    assert all(n.parent_id in ids for n in graph.nodes if n.parent_id is not None)
