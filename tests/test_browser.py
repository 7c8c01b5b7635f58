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
