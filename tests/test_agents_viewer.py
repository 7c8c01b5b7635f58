"""The viewer of an agent eval (evals/test_airline.py run for real): a cell's trajectories in
time order with tool calls, results (errors marked), simulated-user turns, the answer, the
stop and the final environment's difference from the expected one; the operations graph
draws the trajectories as one node that lists its steps. Checked at the API and in Chromium
(live and exported)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fxtr.cli._server import Viewer, export_html, invocation_rows, serve
from fxtr.store import open_store
from tests.test_browser import ARTIFACTS, browser, page  # noqa: F401  (fixtures)

ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def airline(tmp_path_factory):
    """The airline eval's store and job, run as a user runs it."""
    where = tmp_path_factory.mktemp("airline")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "evals/test_airline.py", "-q", "-p", "no:cacheprovider",
         "--fxtr-cache-dir", str(where / "store")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    store = open_store(where / "store")
    (job,) = [j["job_id"] for j in store.iter_jobs()]
    return store, job


def _cell(viewer: Viewer, job: str, case: str) -> dict:
    matrix = viewer.matrix(job, {})
    (row,) = [r for r in matrix["rows"] if case in str(r)]
    return viewer.cell(job, {"index": [str(row["cells"][0]["index"])]})


def test_a_cell_holds_its_trajectories_in_time_order(airline):
    """cancel-ask: the agent asks, the simulated user answers, the agent acts and reports."""
    store, job = airline
    cell = _cell(Viewer(store), job, "cancel-ask")
    trajectories = cell["trajectories"]
    assert [t["sample"] for t in trajectories] == ["0", "1", "2", "3"]
    for t in trajectories:
        kinds = [e["kind"] for e in t["events"]]
        assert kinds == ["system", "user", "assistant", "user_sim", "assistant", "tool_result",
                         "assistant"]  # fmt: skip
        assert t["stop"] == "user_stop" and t["turns"] == 3 and t["tool_calls"] == 1
        (call,) = t["events"][4]["calls"]
        assert call["name"] == "cancel_reservation"
        assert t["events"][3]["text"] == "It is R4."
    right = [t for t in trajectories if t["score"] == 1.0]
    wrong = [t for t in trajectories if t["score"] == 0.0]
    assert len(right) + len(wrong) == 4 and right and wrong
    assert right[0]["events"][4]["calls"][0]["arguments"] == {"reservation_id": "R4"}
    assert wrong[0]["events"][4]["calls"][0]["arguments"] == {"reservation_id": "R1"}
    assert wrong[0]["env"]["reservations"]["R1"]["status"] == "cancelled"
    # each call's change to the stored environment, as paths (DESIGN §18)
    assert wrong[0]["events"][5]["env_changes"] == [
        "flights.FX100.seats: 3 → 4",
        'reservations.R1.status: "booked" → "cancelled"',
    ]
    assert 'reservations.R4.status: "booked" → "cancelled"' in right[0]["events"][5]["env_changes"]
    assert wrong[0]["env_differences"] == [
        "flights.FX100.seats: 4 != 3",
        "flights.FX101.seats: 1 != 2",
        'reservations.R1.status: "cancelled" != "booked"',
        'reservations.R4.status: "booked" != "cancelled"',
    ]
    assert right[0]["env_differences"] == []


def test_tool_errors_are_marked_in_the_trajectory(airline):
    """full-flight: the tool raised; its result is the error, marked, and the agent went on."""
    store, job = airline
    trajectories = _cell(Viewer(store), job, "full-flight")["trajectories"]
    results = [e for t in trajectories for e in t["events"] if e["kind"] == "tool_result"]
    errors = [e for e in results if e["is_error"]]
    assert errors and all(e["content"] == "ValueError: flight FX300 is full" for e in errors)
    assert all(t["tool_errors"] >= 1 for t in trajectories)


def test_the_graph_draws_trajectories_as_one_node_that_lists_its_steps(airline):
    """No column of per-turn boxes: one trajectory node, and its click lists the steps."""
    store, job = airline
    viewer = Viewer(store)
    graph = viewer.graph(job)["graph"]
    (agent,) = [n for n in graph["nodes"] if n["kind"] == "trajectory"]
    assert not [n for n in graph["nodes"] if n["id"].startswith(agent["id"] + "/")]
    assert agent["lines"][0] == "40 trajectories · 96 turns"
    assert agent["steps"] == {"env": 40, "turn": 96, "tool": 46, "user": 52, "trajectory": 40}
    rows = invocation_rows(viewer.view(job), agent["id"], None, None, 0, 1000)
    assert rows["total"] == 40 + 96 + 46 + 52 + 40
    assert any(e["source"] == agent["id"] for e in graph["edges"])


def _open_cancel_ask(tab):
    tab.wait_for_selector("td.cell")
    row = tab.locator("table.matrix tr", has_text="cancel-ask")
    row.locator("td.cell").click()
    tab.wait_for_selector("#panel section.agent-trajectory")


def test_trajectory_panel_in_chromium_live_and_exported(page, airline, tmp_path):  # noqa: F811
    """The panel shows calls with arguments, the simulated user, the answer and the diff."""
    store, job = airline
    server, _ = serve(store, "127.0.0.1", 0)
    try:
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/#/job/{job}")
        _open_cancel_ask(page)
        panel = page.inner_text("#panel")
        assert "cancel_reservation" in panel and '{"reservation_id":"R1"}' in panel
        assert "SIMULATED USER" in panel.upper() and "It is R4." in panel
        assert page.locator("#panel ul.env-diff li").count() >= 4
        assert "user_stop" in panel
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "agent-trajectory.png"))
        page.click("svg.graph g.node.kind-trajectory")
        page.wait_for_selector("#invocations tr.invocation")
        listed = page.locator("#invocations tr.invocation").first.get_attribute("data-address")
        assert "/agent[" in listed
    finally:
        server.shutdown()
        server.server_close()
    exported = tmp_path / "agent.html"
    exported.write_text(export_html(store, job), encoding="utf-8")
    page.goto(exported.as_uri())
    _open_cancel_ask(page)
    assert "cancel_reservation" in page.inner_text("#panel")
