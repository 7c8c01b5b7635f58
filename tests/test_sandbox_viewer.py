"""The viewer and the summary of a sandbox agent eval, run as a user runs it (pytest in a
subprocess): each call's command or code with its stdout, stderr, exit, cut and timeout;
each layer as a diff (text as a unified diff, a binary by size); the final tree; the
summary's sandbox table counts timeouts and errors per model. Checked at the API and in
Chromium (live and exported)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fxtr.cli._server import Viewer, export_html, serve
from fxtr.store import open_store
from tests.test_browser import ARTIFACTS, browser, page  # noqa: F401  (fixtures)

ROOT = Path(__file__).parent.parent

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)"
)

EVAL = textwrap.dedent(
    """
    import pytest

    from fxtr.agents import Agent, tool_call
    from fxtr.evals import evaluate, register_mock
    from fxtr.models import ToolMessage
    from fxtr.sandbox import bash, python, sandbox_check, text_editor
    from tests.sandbox_examples import CASES, TESTS, repo_sandbox

    BUSY = [
        tool_call("bash", cmd="printf 'to stdout\\\\n'; echo 'to stderr' >&2; exit 3"),
        tool_call("python", code="open('data.bin', 'wb').write(bytes(range(256)))"),
        tool_call("text_editor", command="str_replace", path="calc.py",
                  old_str="return a - b", new_str="return a + b"),
        tool_call("bash", cmd="sleep 30"),
        tool_call("bash", cmd="rm README.md && seq 1 5000"),
    ]


    def _script(steps):
        def model(request):
            done = sum(isinstance(m, ToolMessage) for m in request.context)
            return steps[done] if done < len(steps) else "done"
        return model


    BUSY_MODEL = register_mock("sandbox-busy", _script(BUSY))
    QUIET_MODEL = register_mock(
        "sandbox-quiet", _script([tool_call("text_editor", command="view", path="calc.py")])
    )
    AGENT = Agent(
        tools=(bash, python, text_editor),
        sandbox=repo_sandbox(timeout=1.0, output_limit=2000),
    )


    @pytest.mark.fxtr(
        evaluate,
        dims={"model": "model", "case": "case"},
        inputs={"scorer": sandbox_check(TESTS), "agent": AGENT},
    )
    @pytest.mark.parametrize("model", [BUSY_MODEL, QUIET_MODEL])
    @pytest.mark.parametrize("case", CASES)
    def test_agent(model, case, result):
        pass
    """
)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """The eval's store and job, and pytest's terminal output."""
    where = tmp_path_factory.mktemp("sandbox-viewer")
    (where / "test_sandbox_eval.py").write_text(EVAL)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "test_sandbox_eval.py", "-p", "no:cacheprovider",
         "--fxtr-cache-dir", str(where / "store")],
        cwd=where, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    store = open_store(where / "store")
    (job,) = [j["job_id"] for j in store.iter_jobs()]
    return store, job, done.stdout


def _trajectories(store, job) -> dict[str, dict]:
    viewer = Viewer(store)
    matrix = viewer.matrix(job, {})
    out = {}
    for row in matrix["rows"]:
        for cell in row["cells"]:
            detail = viewer.cell(job, {"index": [str(cell["index"])]})
            for t in detail["trajectories"]:
                out["busy" if "sandbox-busy" in t["address"] else "quiet"] = t
    return out


def test_each_call_shows_its_command_output_and_layer(ran):
    store, job, _ = ran
    busy = _trajectories(store, job)["busy"]["sandbox"]
    calls = [busy["calls"][f"call_{i}_0"] for i in range(5)]
    (failing,) = calls[0]["commands"]
    assert failing["exit_code"] == 3 and not failing["timed_out"]
    assert failing["stdout"] == "to stdout\n" and failing["stderr"] == "to stderr\n"
    assert calls[0]["layer"]["files"] == []
    (binary,) = calls[1]["layer"]["files"]
    assert binary["path"] == "data.bin" and binary["change"] == "added"
    assert binary["binary"] and binary["size_before"] is None and binary["size_after"] == 256
    (edit,) = calls[2]["layer"]["files"]
    assert edit["change"] == "changed" and edit["path"] == "calc.py"
    assert edit["diff"] == (
        "--- a/calc.py\n+++ b/calc.py\n@@ -1,5 +1,5 @@\n def add(a, b):\n"
        "-    return a - b\n+    return a + b\n \n \n def mul(a, b):\n"
    )
    (slept,) = calls[3]["commands"]
    assert slept["timed_out"] and slept["exit_code"] is None
    (long,) = calls[4]["commands"]
    expected = "".join(f"{i}\n" for i in range(1, 5001)).encode()
    assert long["cut"] == len(expected) - 2000 and long["stdout"] == expected[:2000].decode()
    (deleted,) = calls[4]["layer"]["files"]
    assert deleted["change"] == "deleted" and deleted["path"] == "README.md"
    name = deleted["path"]  # the diff's header names the file as `diff -u` does: a/PATH
    assert (
        deleted["diff"]
        == f"--- a/{name}\n+++ /dev/null\n@@ -1 +0,0 @@\n-A calculator whose add is wrong.\n"
    )


def test_the_final_tree_is_shown_whole(ran):
    store, job, _ = ran
    found = _trajectories(store, job)
    final = {f["path"]: f for f in found["busy"]["sandbox"]["final"]["files"]}
    assert sorted(final) == ["calc.py", "data.bin", "test_calc.py"]
    assert "return a + b" in final["calc.py"]["text"] and final["calc.py"]["mode"] == "644"
    assert final["data.bin"]["size"] == 256 and "text" not in final["data.bin"]
    quiet = {f["path"] for f in found["quiet"]["sandbox"]["final"]["files"]}
    assert quiet == {"calc.py", "test_calc.py", "README.md"}


def test_the_summary_counts_sandbox_timeouts_and_errors_per_model(ran):
    _, _, output = ran
    lines = output.splitlines()
    (head,) = [i for i, line in enumerate(lines) if line.startswith("sandbox model")]
    assert lines[head].split() == [
        "sandbox", "model", "calls", "timeouts", "errors", "failed", "to", "start", "backend"
    ]  # fmt: skip
    rows = {line.split()[0]: line.split()[1:] for line in lines[head + 2 : head + 4]}
    assert rows["mock/sandbox-busy"] == ["5", "1", "2", "0", "bwrap"]
    assert rows["mock/sandbox-quiet"] == ["1", "0", "0", "0", "bwrap"]


def _open_busy(tab):
    tab.wait_for_selector("td.cell")
    tab.locator("table.matrix td.cell").first.click()
    tab.wait_for_selector("#panel .sandbox-call")


def test_sandbox_calls_in_chromium_live_and_exported(page, ran, tmp_path):  # noqa: F811
    store, job, _ = ran
    server, _ = serve(store, "127.0.0.1", 0)
    try:
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/#/job/{job}")
        _open_busy(page)
        panel = page.inner_text("#panel")
        assert "$ printf 'to stdout\\n'; echo 'to stderr' >&2; exit 3" in panel
        assert "exit 3" in panel and "stdout 10 chars · stderr 10 chars" in panel
        page.locator("#panel details.sb-streams summary").first.click()
        assert "to stderr" in page.inner_text("#panel pre.sb-stderr")
        assert "timed out after 1 s" in panel
        assert "binary: none → 256 B" in panel
        assert page.locator("#panel .sb-del", has_text="return a - b").count() >= 1
        assert page.locator("#panel .sb-add", has_text="return a + b").count() >= 1
        page.click("#panel details.sandbox-tree summary")
        assert page.locator("#panel ul.sb-tree > li").count() >= 3
        ARTIFACTS.mkdir(exist_ok=True)
        page.locator("#panel .sandbox-call").nth(1).scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "sandbox-trajectory.png"))
    finally:
        server.shutdown()
        server.server_close()
    exported = tmp_path / "sandbox.html"
    exported.write_text(export_html(store, job), encoding="utf-8")
    page.goto(exported.as_uri())
    _open_busy(page)
    assert "stdout 10 chars · stderr 10 chars" in page.inner_text("#panel")
