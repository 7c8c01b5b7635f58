"""``fxtr view --export latest`` writes every eval of the newest pytest run (issue 37 item 7).

The CI artifact of a run of several evals showed one of them. A pytest session records its
id on the jobs it runs (each attempt's ``run``); ``latest`` names the newest job's session.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

EVALS = textwrap.dedent(
    """
    import pytest

    from fxtr.evals import Case, evaluate, includes, register_mock, user_text

    MODEL = register_mock("export-model", lambda r: "answer " + user_text(r))
    CASES = [Case(id=f"c{i}", input=str(i), target=str(i)) for i in range(3)]

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes()})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", CASES)
    def test_first(model, case, result):
        pass

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes()})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", CASES[:2])
    def test_second(model, case, result):
        pass
    """
)


def _fxtr(cwd, *args):
    return subprocess.run([sys.executable, "-m", "fxtr.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def _exported(path):
    html = path.read_text()
    (data,) = re.findall(r'<script type="application/json" id="fxtr-data">(.*?)</script>', html)
    blocks = dict(re.findall(r'<script type="application/json" id="([^"]+)">(.*?)</script>', html))
    return json.loads(data), blocks


def test_latest_exports_every_job_of_the_newest_pytest_session(pytester):
    pytester.makepyfile(test_two=EVALS)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    assert pytester.runpytest_subprocess("-p", "no:cacheprovider").ret == 0
    older = {r["job_id"] for r in json.loads(_fxtr(pytester.path, "jobs", "--json").stdout)}
    assert pytester.runpytest_subprocess("-p", "no:cacheprovider").ret == 0
    rows = json.loads(_fxtr(pytester.path, "jobs", "--json").stdout)
    newest = [r["job_id"] for r in rows if r["job_id"] not in older]
    assert len(newest) == 2 and len(rows) == 4
    done = _fxtr(pytester.path, "view", "--export", "latest", "-o", "fxtr-report.html")
    assert done.returncode == 0, done.stderr
    data, blocks = _exported(pytester.path / "fxtr-report.html")
    assert sorted(data["job"]) == sorted(newest)  # this session's jobs, not the older run's
    evals = {data["job"][j]["evaluation"]["eval"] for j in newest}
    assert evals == {"test_two.py::test_first", "test_two.py::test_second"}
    assert len(data["jobs"]) == 2
    # each job's cells and invocations are in the file, under ids of their own
    for job_id in newest:
        prefix = data["cell_prefix"][job_id]
        cells = len(data["matrix"][job_id]["rows"])
        assert cells in (2, 3)
        for i in range(cells):
            cell = json.loads(blocks[f"cell-{prefix}{i}"])
            assert cell is not None
        for block in data["index"][job_id].values():
            assert json.loads(blocks[block])["address"] in data["index"][job_id]
    assert len(set(blocks)) == len(blocks)
    # a job named by its id exports that job alone
    one = _fxtr(pytester.path, "view", "--export", newest[0], "-o", "one.html")
    assert one.returncode == 0, one.stderr
    data, _ = _exported(pytester.path / "one.html")
    assert list(data["job"]) == [newest[0]] and "cell_prefix" not in data


def test_a_session_export_opens_each_jobs_cells_offline_in_chromium(tmp_path):
    """Two jobs in one file: the list of jobs, then each job's matrix and its own cells."""
    import pytest

    from tests import test_browser

    test_browser._require_browser()
    from playwright.sync_api import sync_playwright

    from fxtr.cli._server import export_html
    from fxtr.store import open_store
    from tests.viewer_jobs import make_eval_job

    store = open_store(tmp_path / "store")
    a = make_eval_job(store).job_id
    b = make_eval_job(store, variant="better", baseline=a).job_id
    exported = tmp_path / "session.html"
    exported.write_text(export_html(store, [a, b]), encoding="utf-8")
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=test_browser.CHROMIUM,
                                    args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(
            ("file:", "data:")) else (problems.append(route.request.url), route.abort()))
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        page.goto(exported.as_uri())
        for job_id in (b, a):
            page.goto(exported.as_uri() + f"#/job/{job_id}")
            page.wait_for_selector("#matrix td.cell")
            page.click("#matrix tr[data-case='boom'] td.cell >> nth=0")
            page.wait_for_selector("#panel .cell-invocation")
            assert "provider unreachable" in page.inner_text("#panel")
            page.click("#matrix tr[data-case='easy'] td.cell >> nth=0")
            page.wait_for_function(
                "() => !document.querySelector('#panel').innerText.includes('unreachable')")
        browser.close()
    if problems:
        pytest.fail("; ".join(problems))
