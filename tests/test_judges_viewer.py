"""The viewer shows a judged eval's corrected value beside the raw one, and the judge's audit."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fxtr.cli._server import export_html
from fxtr.report._evals import evaluation_of
from fxtr.store import open_store
from tests.test_browser import _require_browser, browser, page  # noqa: F401  (fixtures)

ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def judged_store(tmp_path_factory):
    """The judged example evals (evals/test_judged.py) run by pytest in a fresh project."""
    project = tmp_path_factory.mktemp("judged")
    (project / "evals" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "evals" / "test_judged.py", project / "evals")
    for name in ("capitals.jsonl", "judge_gold.jsonl"):
        shutil.copy(ROOT / "evals" / "data" / name, project / "evals" / "data")
    (project / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    subprocess.run([sys.executable, "-m", "pytest", "evals", "-q", "-p", "no:cacheprovider"],
                   cwd=project, check=True, capture_output=True)
    store = open_store(project / ".fxtr")
    jobs = {}
    for record in store.iter_jobs():
        evaluation = evaluation_of(record)
        if evaluation:
            jobs[evaluation["eval"].rsplit("::", 1)[1]] = record["job_id"]
    return store, jobs


def test_the_job_record_keeps_the_judge_figures(judged_store):
    store, jobs = judged_store
    evaluation = evaluation_of(store.get_job(jobs["test_calibrated_judge"]))
    for group in evaluation["groups"]:
        assert group["judge"]["usable"] is True and group["judge"]["q0"]["n"] == 10
        assert group["corrected"]["low"] <= group["corrected"]["value"] <= group["corrected"]["high"]
    pairwise = evaluation_of(store.get_job(jobs["test_pairwise_judge"]))
    assert all(g["judge"]["position_inconsistency"] > 0 for g in pairwise["groups"])


def test_the_viewer_shows_raw_and_corrected_and_the_audit(page, judged_store, tmp_path):  # noqa: F811
    store, jobs = judged_store
    job_id = jobs["test_calibrated_judge"]
    exported = tmp_path / "judged.html"
    exported.write_text(export_html(store, job_id), encoding="utf-8")
    page.goto(exported.as_uri())
    page.wait_for_selector("#judge")
    text = page.inner_text("#judge")
    evaluation = evaluation_of(store.get_job(job_id))
    for group in evaluation["groups"]:
        corrected = f"{group['corrected']['value']:.3f}".rstrip("0").rstrip(".")
        assert corrected in text
        assert f"{group['mean']:.3f}".rstrip("0").rstrip(".") in text
    assert "q0 (specificity)" in text and "swayed-judge" in text and "flip rate" in text
    assert "corrected" in page.inner_text("#matrix thead")
    pair = tmp_path / "pairwise.html"
    pair.write_text(export_html(store, jobs["test_pairwise_judge"]), encoding="utf-8")
    page.goto(pair.as_uri())
    page.wait_for_selector("#judge")
    assert "position inconsistency" in page.inner_text("#judge")
