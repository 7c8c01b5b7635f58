"""The viewer in a real headless Chromium (Debian's), driven by Playwright.

Locally these tests skip when Chromium or Playwright is missing; under CI=true they fail.
Every request that is not to this machine is blocked; any page error, console error or
dialog fails the test (an XSS probe must stay inert). Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from fxtr.cli._server import export_html, serve
from fxtr.store import open_store
from tests.viewer_jobs import XSS, make_job

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def _require_browser():
    missing = []
    if not Path(CHROMIUM).exists():
        missing.append("Debian's chromium (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("playwright (pip install -e '.[browser]')")
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail("browser tests need " + " and ".join(missing))
        pytest.skip("browser tests need " + " and ".join(missing))


@pytest.fixture(scope="module")
def browser():
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
            ],
        )
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    problems: list[str] = []

    def guard(route):
        url = urlsplit(route.request.url)
        if url.scheme in ("file", "data") or url.hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            problems.append(f"blocked request to {route.request.url}")
            route.abort()

    page.route("**/*", guard)
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))

    def on_dialog(dialog):
        problems.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    yield page
    context.close()
    assert problems == []


@pytest.fixture
def served(tmp_path):
    store = open_store(tmp_path / "store")
    job = make_job(store)
    server, _ = serve(store, "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.server_address[1]}/", job, store
    server.shutdown()
    server.server_close()


def test_jobs_page_to_a_failed_step_and_its_invocation(page, served):
    """Jobs page -> job with a failed step -> its reason and log line -> the XSS result as text."""
    url, job, _ = served
    page.goto(url)
    page.wait_for_selector(f"tr[data-job='{job.job_id}']")
    page.select_option("#filter-status", "failed")
    page.click(f"tr[data-job='{job.job_id}']")
    page.wait_for_selector("svg.graph [data-op='view.evaluate/judge']")
    assert "reason: tool_error" in page.text_content("svg.graph [data-op='view.evaluate/judge']")
    failed = "tr.invocation[data-address='view.evaluate/judge[case=broken]']"
    page.click(failed)
    page.wait_for_selector("#panel[data-address='view.evaluate/judge[case=broken]']")
    panel = page.inner_text("#panel")
    assert "tool_error" in panel and "judge unreachable for broken" in panel
    assert "judged broken: looks fine" in page.inner_text("#panel pre.logs")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "job-page.png"), full_page=True)
    page.click("button:has-text('all statuses')")
    page.click("tr.invocation[data-address='view.evaluate/judge[case=xss]']")
    page.wait_for_selector("#panel[data-address='view.evaluate/judge[case=xss]']")
    assert XSS in page.inner_text("#panel .result")
    assert page.locator("#panel script, #panel img").count() == 0


def test_export_opens_offline_with_the_same_graph(page, served, tmp_path):
    """The exported file, opened from file:// with the network blocked, shows the same graph."""
    url, job, store = served
    page.goto(url + f"#/job/{job.job_id}")
    page.wait_for_selector("svg.graph [data-op]")
    live = sorted(
        page.eval_on_selector_all("svg.graph [data-op]", "els => els.map(e => e.dataset.op)")
    )
    exported = tmp_path / "job.html"
    exported.write_text(export_html(store, job.job_id), encoding="utf-8")
    page.goto(exported.as_uri())
    page.wait_for_selector("svg.graph [data-op]")
    offline = sorted(
        page.eval_on_selector_all("svg.graph [data-op]", "els => els.map(e => e.dataset.op)")
    )
    assert offline == live
    page.click("tr.invocation[data-address='view.evaluate/judge[case=broken]']")
    page.wait_for_selector("#panel[data-address='view.evaluate/judge[case=broken]']")
    assert "judge unreachable" in page.inner_text("#panel")
    page.screenshot(path=str(ARTIFACTS / "export.png"), full_page=True)


# eval jobs: the results matrix, its filters, a cell's transcript, comparisons ---------------


@pytest.fixture(scope="module")
def eval_served(tmp_path_factory):
    """Two real runs of one eval (A, then B with A as its baseline), served."""
    from tests.viewer_jobs import make_eval_job

    _require_browser()
    store = open_store(tmp_path_factory.mktemp("evals") / "store")
    a = make_eval_job(store)
    b = make_eval_job(store, variant="better", baseline=a.job_id)
    server, _ = serve(store, "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.server_address[1]}", store, a.job_id, b.job_id
    server.shutdown()
    server.server_close()


def matrix_rows(page):
    return page.eval_on_selector_all("#matrix tbody tr", "rows => rows.map(r => r.dataset.case)")


def test_eval_job_leads_with_the_matrix_and_its_filters(page, eval_served):
    """The matrix shows k/n per case and model, coloured; filters narrow the rows."""
    url, _, _, b = eval_served
    page.goto(f"{url}/job/{b[:6]}")
    page.wait_for_selector("#matrix td.cell")
    assert page.inner_text("h1").startswith("evals/test_res.py::test_res")
    assert "gate failed" in page.inner_text(".job-head")
    assert matrix_rows(page) == ["easy", "flaky", "hard", "regress", "boom", "xss"]
    heads = page.eval_on_selector_all("#matrix thead th", "hs => hs.map(h => h.innerText)")
    assert [h.split("\n")[0] for h in heads] == ["case", "small", "large"]
    regress = page.locator("#matrix tr[data-case='regress'] td.cell")
    assert regress.nth(0).inner_text().split("\n") == ["0/2", "was 2/2"]  # B's baseline is A
    assert "sc-0" in (regress.nth(0).get_attribute("class") or "")
    assert "sc-10" in (page.get_attribute("#matrix tr[data-case='easy'] td.cell", "class") or "")
    assert "missing" in page.inner_text("#matrix tr[data-case='boom'] td.cell")
    for name, expected in (
        ("flaky", ["flaky"]),
        ("missing", ["boom"]),
        ("changed", ["hard", "regress"]),
        ("failed", ["flaky", "regress"]),
    ):
        page.click(f"button[data-filter='{name}']")
        page.wait_for_selector(f"button.active[data-filter='{name}']")
        assert matrix_rows(page) == expected, name
    page.click("button[data-filter='all']")
    page.wait_for_selector("button.active[data-filter='all']")
    page.fill("#matrix-search", "ea")
    page.press("#matrix-search", "Enter")
    page.wait_for_function("() => document.querySelectorAll('#matrix tbody tr').length === 1")
    assert matrix_rows(page) == ["easy"]
    page.wait_for_selector("svg.graph [data-op='res.evaluate/answer'].failed")
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(f"{url}/job/{b}")
    page.wait_for_selector("svg.graph [data-op]")
    page.screenshot(path=str(ARTIFACTS / "eval-job.png"), full_page=True)


def test_a_cell_opens_its_transcript(page, eval_served):
    """Clicking a cell shows its samples' invocations with the model's messages and replies."""
    url, _, a, _ = eval_served
    page.goto(f"{url}/#/job/{a}")
    page.wait_for_selector("#matrix td.cell")
    page.click("#matrix tr[data-case='flaky'] td.cell >> nth=0")
    page.wait_for_selector("#panel .cell-invocation")
    panel = page.inner_text("#panel")
    assert "flaky · small" in panel and "1/2 (flaky)" in panel
    assert [h.strip() for h in page.locator("#panel h3.sample-head").all_inner_texts()] == [
        "sample 0",
        "sample 1",
    ]
    subject = "#panel .transcript[data-role='subject']"
    judge = "#panel .transcript[data-role='judge']"
    replies = page.locator(f"{subject} pre.reply").all_inner_texts()
    assert replies == ["RIGHT: flaky: a coin toss", "WRONG: flaky: a coin toss"]
    assert page.locator(f"{subject} .msg-user pre").first.inner_text() == "flaky: a coin toss"
    assert page.locator(f"{judge} pre.reply").all_inner_texts() == ["RIGHT", "WRONG"]
    heads = page.locator(f"{judge} .call-head").all_inner_texts()
    assert len(heads) == 2 and all(h.startswith("judge · judge-mini") for h in heads), heads
    assert "40 in (32 cached) / 1 out tok" in heads[0]
    assert page.locator(f"{judge} .msg-system pre").first.inner_text() == "Reply RIGHT or WRONG."
    assert page.locator(f"{judge} .msg-user pre").first.inner_text() == "RIGHT: flaky: a coin toss"
    assert "judge" not in page.locator(f"{subject} .call-head").first.inner_text()
    page.screenshot(path=str(ARTIFACTS / "cell-transcript.png"), full_page=False)
    page.click("#panel .cell-invocation button.link >> nth=1")  # the score step's details
    page.wait_for_selector(
        "#panel[data-address='res.evaluate/score[model=small,case=flaky,sample=0]']"
    )
    assert "res.score" in page.inner_text("#panel")
    assert page.locator(f"{judge} pre.reply").all_inner_texts() == ["RIGHT"]
    assert "40 in (32 cached) / 1 out tok" in page.inner_text(f"{judge} .call-head")
    assert page.locator(f"{judge} .msg").count() == 3  # system, user, reply
    page.click("#panel .close")
    page.click("#matrix tr[data-case='flaky'] td.cell >> nth=0")
    page.click("#panel .cell-invocation button.link >> nth=0")
    page.wait_for_selector(
        "#panel[data-address='res.evaluate/answer[model=small,case=flaky,sample=0]']"
    )
    assert "res.answer" in page.inner_text("#panel")
    assert page.locator(f"{subject} pre.reply").all_inner_texts() == ["RIGHT: flaky: a coin toss"]


def test_an_xss_probe_in_a_result_stays_text(page, eval_served):
    """A question and reply carrying markup are shown as text, in the matrix and the panel."""
    url, _, a, _ = eval_served
    page.goto(f"{url}/job/{a}")
    page.wait_for_selector("#matrix td.cell")
    page.click("#matrix tr[data-case='xss'] td.cell >> nth=1")
    page.wait_for_selector("#panel .cell-invocation")
    assert XSS in page.inner_text("#panel [data-role='subject'] .msg-user pre >> nth=0")
    assert XSS in page.inner_text("#panel [data-role='subject'] pre.reply >> nth=0")
    assert page.locator("#main script, #main img, #panel script, #panel img").count() == 0
    page.wait_for_timeout(
        300
    )  # an onerror handler would have fired by now (the page fixture fails)


def test_the_comparison_page(page, eval_served):
    """/compare/A/B: per model the means, delta, interval, flipped cases and the verdict."""
    url, _, a, b = eval_served
    page.goto(f"{url}/compare/{a[:7]}/latest")
    page.wait_for_selector("#comparison tbody tr")
    rows = page.eval_on_selector_all(
        "#comparison tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.innerText))"
    )
    assert [r[0] for r in rows] == ["small", "large"]
    large = rows[1]
    assert large[1:4] == ["0.917", "0.750", "-0.167"] and large[5] == "6"  # 5.5/6, 4.5/6
    assert large[8] == "no significant change"
    flips = page.inner_text("#flipped")
    assert "small: pass → fail (1)\nregress" in flips and "small: fail → pass (1)\nhard" in flips
    page.wait_for_selector("button.active[data-filter='changed']")
    assert matrix_rows(page) == ["hard", "regress"]
    page.screenshot(path=str(ARTIFACTS / "compare.png"), full_page=True)
    page.goto(f"{url}/job/{a}?compare={b[:8]}&show=changed")  # any two jobs, from the URL
    page.wait_for_selector("button.active[data-filter='changed']")
    assert matrix_rows(page) == ["hard", "regress"]
    assert "was 0/2" in page.inner_text("#matrix tr[data-case='regress']")
    page.goto(f"{url}/job/{b}")
    page.click("#to-compare")
    page.wait_for_selector("#comparison tbody tr")


def test_jobs_page_shows_the_gate_and_picks_two_jobs_to_compare(page, eval_served):
    """The jobs list marks a failed gate; checking two jobs opens their comparison."""
    url, _, a, b = eval_served
    page.goto(url)
    page.wait_for_selector(f"tr[data-job='{b}']")
    assert page.inner_text(f"tr[data-job='{b}'] .gate") == "gate failed"
    page.check(f"input.pick[data-job='{a}']")
    page.check(f"input.pick[data-job='{b}']")
    page.click("#compare-picked")
    page.wait_for_selector("#comparison tbody tr")
    assert a in page.inner_text("main") and b in page.inner_text("main")


def test_graph_labels_fit_their_nodes_and_the_page_does_not_overflow(page, eval_served):
    """Every label of the drawing stays inside its node; failed nodes are marked."""
    url, _, _, b = eval_served
    page.goto(f"{url}/job/{b}")
    page.wait_for_selector("svg.graph [data-op]")
    widths = page.eval_on_selector_all(
        "svg.graph .node text", "ts => ts.map(t => t.getComputedTextLength())"
    )
    assert widths and max(widths) <= 210 - 12
    assert page.locator("svg.graph .node.failed rect.fail-bar").count() == 1
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_long_names_wrap_then_end_in_an_ellipsis(page, tmp_path):
    """Names longer than a node wrap onto a second line and are cut there, the rest a tooltip."""
    from tests.viewer_jobs import make_long_job

    store = open_store(tmp_path / "long")
    job = make_long_job(store)
    server, _ = serve(store, "127.0.0.1", 0)
    try:
        page.set_viewport_size({"width": 900, "height": 700})
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/job/{job.job_id}")
        page.wait_for_selector("svg.graph [data-op]")
        widths = page.eval_on_selector_all(
            "svg.graph .node text", "ts => ts.map(t => t.getComputedTextLength())"
        )
        assert max(widths) <= 210 - 12
        op = "evals.test_a_module_with_a_long_name::test_an_eval_with_a_long_name_too/" + (
            "the_first_operation_with_an_equally_long_name"
        )
        node = page.locator(f"svg.graph [data-op='{op}']")
        names = node.locator("text.name").all_text_contents()
        assert len(names) == 2 and names[1].endswith("…")
        assert op in node.locator("title").text_content()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.screenshot(path=str(ARTIFACTS / "long-names.png"), full_page=True)
    finally:
        server.shutdown()
        server.server_close()


def test_ten_thousand_cases_first_screen(page, tmp_path):
    """A 10,000-case eval: the first 100 rows show, pages move on; time to first screen printed."""
    import time

    from tests.viewer_jobs import make_eval_job

    store = open_store(tmp_path / "big")
    job = make_eval_job(store, n=10_000 - 6, models=("large",), samples=1)
    server, _ = serve(store, "127.0.0.1", 0)
    try:
        start = time.perf_counter()
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/job/{job.job_id}")
        page.wait_for_selector("#matrix tbody tr")
        first_screen = time.perf_counter() - start
        assert page.locator("#matrix tbody tr").count() == 100
        assert page.inner_text("#matrix-range") == "1\u2013100 of 10000 case(s)"
        page.click("#results .pager button:has-text('next')")
        page.wait_for_function(
            "() => document.getElementById('matrix-range').innerText.startsWith('101\u2013200')"
        )
        page.wait_for_selector("svg.graph [data-op]")
        page.screenshot(path=str(ARTIFACTS / "ten-thousand-cases.png"))
    finally:
        server.shutdown()
        server.server_close()
    print(f"\n10,000-case eval in Chromium: first screen (matrix) in {first_screen:.2f}s")


def test_an_exported_eval_shows_its_matrix_offline(page, eval_served, tmp_path):
    """The export of an eval job, opened from file://, has the matrix, filters and cell panels."""
    _, store, a, _ = eval_served
    exported = tmp_path / "eval.html"
    exported.write_text(export_html(store, a), encoding="utf-8")
    page.goto(exported.as_uri())
    page.wait_for_selector("#matrix td.cell")
    assert matrix_rows(page) == ["easy", "flaky", "hard", "regress", "boom", "xss"]
    page.click("button[data-filter='missing']")
    page.wait_for_selector("button.active[data-filter='missing']")
    assert matrix_rows(page) == ["boom"]
    page.click("#matrix tr[data-case='boom'] td.cell >> nth=0")
    page.wait_for_selector("#panel .cell-invocation")
    assert "provider unreachable" in page.inner_text("#panel")


def test_keys_with_address_syntax_list_under_their_operation(page, tmp_path):
    """Keys holding '/', brackets and escaped quotes mid-address (a child workflow mapped over
    them): live and offline, the failed operation lists all its invocations (the page strips
    keys itself offline), each opening its own error."""
    from tests.viewer_jobs import HOSTILE_KEYS, make_hostile_job

    _require_browser()
    store = open_store(tmp_path / "store")
    job = make_hostile_job(store)
    exported = tmp_path / "keys.html"
    exported.write_text(export_html(store, job.job_id), encoding="utf-8")
    server, _ = serve(store, "127.0.0.1", 0)
    try:
        for where in (f"http://127.0.0.1:{server.server_address[1]}/#/job/{job.job_id}",
                      exported.as_uri()):  # fmt: skip
            page.goto(where)
            heading = f"view.outer/inner/work · failed · {len(HOSTILE_KEYS)} invocation(s)"
            page.wait_for_selector(f"h3:has-text('{heading}')")
            assert page.locator("tr.invocation").count() == len(HOSTILE_KEYS), where
            ops = page.eval_on_selector_all("svg.graph [data-op]", "els => els.map(e => e.dataset.op)")
            assert sorted(ops) == ["view.outer", "view.outer/inner", "view.outer/inner/work"]
            row = page.locator("tr.invocation", has_text='inner[case="quo\\"te"]/work')
            row.click()
            page.wait_for_selector("#panel h2")
            assert "failed on purpose for key quo\"te" in page.inner_text("#panel"), where
    finally:
        server.shutdown()
        server.server_close()
