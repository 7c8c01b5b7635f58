"""The viewer's cell of a failed trajectory and of an eval whose results are not scores
(issue 36 item 5): the trajectory drawn like a finished one up to the failure, with the
failed step's reason; no empty reply box for a failed call. Checked at the API and in
Chromium."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from fxtr.cli._server import Viewer, serve
from fxtr.store import open_store
from tests.test_browser import ARTIFACTS, browser, page  # noqa: F401  (fixtures)

FLAKY = textwrap.dedent(
    '''
    import pytest
    from fxtr.agents import Agent, tool, tool_call
    from fxtr.evals import Case, evaluate, includes, register_mock, user_text
    from fxtr.models import ModelCallFailure, ToolMessage

    @tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    def flaky(request):
        if isinstance(request.context[-1], ToolMessage):
            return ModelCallFailure(category="quota", description="HTTP 429: out of credit",
                                    status_code=429)
        a, b = user_text(request).split("+")
        return tool_call("add", a=float(a), b=float(b))

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes(),
                              "agent": Agent(tools=(add,), system="Use the tool.")})
    @pytest.mark.parametrize("model", [register_mock("flaky-calc", flaky)])
    @pytest.mark.parametrize("case", [Case(id="x", input="2+3", target="5")])
    def test_flaky(model, case, result):
        assert result is not None
    '''
)


@pytest.fixture(scope="module")
def failed_agent(tmp_path_factory):
    """A trajectory whose second turn fails (429, budget) after a tool call, run by pytest."""
    where = tmp_path_factory.mktemp("flaky")
    (where / "test_flaky.py").write_text(FLAKY)
    (where / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=where, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    store = open_store(where / ".fxtr")
    (job,) = [j["job_id"] for j in store.iter_jobs()]
    return store, job


def test_a_failed_trajectory_is_drawn_up_to_its_failure_with_the_reason(failed_agent):
    store, job = failed_agent
    cell = Viewer(store).cell(job, {"index": ["0"]})
    (t,) = cell["trajectories"]
    assert [e["kind"] for e in t["events"]] == ["system", "user", "assistant", "tool_result"]
    assert t["events"][2]["calls"][0]["arguments"] == {"a": 2.0, "b": 3.0}
    assert t["events"][3]["content"] == "5.0" and not t["events"][3]["is_error"]
    assert t["stop"] == "failed" and t["answer"] is None
    assert (t["turns"], t["tool_calls"], t["sample"]) == (1, 1, "0")
    assert t["failed"]["address"].endswith("/turn[1]")
    assert t["failed"]["reason"] == "budget"
    assert "429" in t["failed"]["error"]


def test_the_failed_trajectory_in_chromium(page, failed_agent):  # noqa: F811
    store, job = failed_agent
    server, _ = serve(store, "127.0.0.1", 0)
    try:
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/#/job/{job}")
        page.wait_for_selector("td.cell")
        page.locator("td.cell").first.click()
        page.wait_for_selector("#panel section.agent-trajectory")
        section = page.locator("#panel section.agent-trajectory")
        text = section.inner_text()
        assert "failed" in section.locator(".trajectory-head").inner_text()
        assert "add" in text and '{"a":2,"b":3}' in text and "5.0" in text
        failure = section.locator(".trajectory-failed")
        assert failure.get_attribute("data-reason") == "budget"
        assert "FAILED AT TURN[1]" in failure.inner_text().upper()
        assert "429" in failure.inner_text()
        # the failed call's transcript in the steps below: its error, no empty reply box
        page.locator("#panel details.agent-steps > summary").click()
        replies = [
            r.strip() for r in page.locator("#panel .transcript pre.reply").all_inner_texts()
        ]
        assert "" not in replies
        assert page.locator("#panel .transcript .reply-empty").count() == 1  # turn 0: a call
        assert page.locator("#panel .transcript pre.error").count() >= 1
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "agent-trajectory-failed.png"), full_page=True)
    finally:
        server.shutdown()
        server.server_close()


JUDGED = textwrap.dedent(
    """
    from typing import Annotated
    import pytest
    from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow

    @step(name="t.say")
    async def say(context: StepContext, q: str) -> str:
        return "said " + q

    @workflow(name="t.wf")
    async def wf(context: WorkflowContext, q: Annotated[ArrayHandle[str], "[case: str]"]
                 ) -> Annotated[ArrayHandle[str], "[case: str]"]:
        return context.run_step("say", say, {"q": q}, map_over=["case"])

    @pytest.mark.fxtr(wf)
    @pytest.mark.parametrize("q", ["one", "two", "three"])
    def test_text(q, result):
        assert result == "said one"
    """
)


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_cell_whose_result_is_not_a_score_shows_the_tests_outcome(
    page,  # noqa: F811
    pytester,
    workers,
):
    """The test judged each result: the cell says passed or failed, not only `no score`."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_text=JUDGED)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *workers)
    result.assert_outcomes(passed=1, failed=2)
    store = open_store(pytester.path / ".fxtr")
    (job,) = [j["job_id"] for j in store.iter_jobs()]
    matrix = Viewer(store).matrix(job, {})
    texts = {r["label"]: r["cells"][0]["text"] for r in matrix["rows"]}
    assert texts == {
        "one": "no score · passed",
        "two": "no score · failed",
        "three": "no score · failed",
    }
    assert matrix["counts"]["failed"] == 2 and matrix["counts"]["missing"] == 0
    server, _ = serve(store, "127.0.0.1", 0)
    try:
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/#/job/{job}")
        page.wait_for_selector("#matrix td.cell")
        cells = page.eval_on_selector_all("#matrix td.cell", "els => els.map(e => e.innerText)")
        assert sorted(cells) == ["no score · failed", "no score · failed", "no score · passed"]
        page.click("#matrix tr[data-case='two'] td.cell")
        page.wait_for_selector("#panel .cell-invocation")
        assert "no score: the test failed on its result" in page.inner_text("#panel")
        if not workers:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "unscored-outcome.png"))
    finally:
        server.shutdown()
        server.server_close()
