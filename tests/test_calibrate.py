"""``fxtr calibrate``: the A/A control's false-flip rate, variance parts and MDE (DESIGN §15)."""

from __future__ import annotations

import json
import random
import shutil
import statistics
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from fxtr.cli import main
from fxtr.cli._calibrate import aa_control

ROOT = Path(__file__).parent.parent


def _evaluation(seed, n=60, k=8, groups=("a",), shift=0.0):
    rng = random.Random(seed)
    cells = []
    for g in groups:
        for i in range(n):
            p = min(1.0, rng.random() + shift)
            values = [float(rng.random() < p) for _ in range(k)]
            cells.append({"group": {"model": g}, "case": {"case": f"c{i}"}, "values": values,
                          "status": "ok"})
    return {"eval": "evals/x.py::test_x", "sample_dim": "sample", "cells": cells}


def test_one_distribution_gives_a_false_flip_rate_near_alpha():
    """Averaged over seeded datasets, the share of flagged A/A splits is alpha = 0.05 (± 0.02)."""
    rates = [aa_control(_evaluation(s), splits=200, seed=s)[0]["false_flip_rate"]
             for s in range(10)]
    assert 0.03 <= statistics.fmean(rates) <= 0.07, rates
    loose = [aa_control(_evaluation(s), splits=200, seed=s, alpha=0.2)[0]["false_flip_rate"]
             for s in range(10)]
    assert 0.16 <= statistics.fmean(loose) <= 0.24, loose


def test_the_flags_are_the_paired_t_tests_verdicts_on_the_halves():
    """An independent recount: scipy's paired t-test on the same halves flags the same splits."""
    evaluation = _evaluation(3, n=30, k=4)
    (group,) = aa_control(evaluation, splits=50, seed=9)
    rng = random.Random(f"fxtr-calibrate/9/{sorted({'model': 'a'}.items())!r}")
    flagged = 0
    for _ in range(50):
        a, b = [], []
        for cell in evaluation["cells"]:
            values = cell["values"]
            order = list(range(len(values)))
            rng.shuffle(order)
            a.append(np.mean([values[i] for i in order[:2]]))
            b.append(np.mean([values[i] for i in order[2:4]]))
        if np.any(np.array(a) != np.array(b)):
            flagged += scipy.stats.ttest_rel(b, a).pvalue < 0.05
    assert group["false_flips"] == flagged
    assert group["regressed"] + group["improved"] == flagged


def test_the_variance_parts_and_the_mde_against_numpy():
    evaluation = _evaluation(5, n=25, k=6)
    (group,) = aa_control(evaluation, splits=10)
    values = np.array([c["values"] for c in evaluation["cells"]])
    between = np.var(values.mean(axis=1), ddof=1)
    within = np.var(values, axis=1, ddof=1).mean()
    assert group["variance"]["between"] == pytest.approx(between)
    assert group["variance"]["within"] == pytest.approx(within)
    assert group["variance"]["ratio"] == pytest.approx(between / within)
    z = scipy.stats.norm.ppf(0.975) + scipy.stats.norm.ppf(0.8)
    assert group["mde"] == pytest.approx(z * np.sqrt(2 * within / 6) / np.sqrt(25))
    assert (group["cases"], group["samples"], group["splits"]) == (25, 6, 10)


def test_the_same_seed_gives_the_same_figures_and_groups_are_apart():
    evaluation = _evaluation(11, groups=("a", "b"))
    first = aa_control(evaluation, splits=40, seed=1)
    assert first == aa_control(evaluation, splits=40, seed=1)
    assert [g["group"] for g in first] == [{"model": "a"}, {"model": "b"}]


def test_cases_without_two_samples_sit_out_and_a_job_without_samples_is_refused():
    evaluation = _evaluation(2, n=10, k=3)
    evaluation["cells"][0]["values"] = [1.0, None, None]  # one scored sample: sits out
    evaluation["cells"][1]["status"] = "missing"
    (group,) = aa_control(evaluation, splits=5)
    assert group["cases"] == 8
    single = _evaluation(2, n=10, k=1)
    with pytest.raises(ValueError, match=r"1 sample\(s\) per case.*samples >= 2"):
        aa_control(single)


# --------------------------------------------------------------------------- the command


ONCE = """
import pytest
from fxtr.evals import Case, evaluate, includes, register_mock

MODEL = register_mock("once", "yes")

@pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                  inputs={"scorer": includes()})
@pytest.mark.parametrize("model", [MODEL])
@pytest.mark.parametrize("case", [Case(id=f"c{i}", input=str(i), target="yes") for i in range(3)])
def test_once(model, case, result):
    pass
"""


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """The A/A example eval (two models of one distribution, six samples) run by pytest."""
    import subprocess
    import sys

    project = tmp_path_factory.mktemp("twins")
    (project / "evals").mkdir()
    shutil.copy(ROOT / "evals" / "test_aa.py", project / "evals" / "test_aa.py")
    (project / "evals" / "test_once.py").write_text(ONCE)
    (project / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    for name in ("test_aa.py", "test_once.py"):
        subprocess.run(
            [sys.executable, "-m", "pytest", f"evals/{name}", "-q", "-p", "no:cacheprovider"],
            cwd=project, check=True, capture_output=True,
        )
    return project / ".fxtr"


def _job_of(store, eval_name, capsys):
    assert main(["--store", str(store), "jobs", "--json"]) == 0
    jobs = json.loads(capsys.readouterr().out)
    return next(j["job_id"] for j in jobs if eval_name in json.dumps(j))


def test_calibrate_prints_each_group_and_json(twins, capsys):
    job = _job_of(twins, "test_aa", capsys)
    assert main(["--store", str(twins), "calibrate", job]) == 0
    out = capsys.readouterr().out
    assert "mock/twin-a" in out and "mock/twin-b" in out and "false flips" in out
    assert main(["--store", str(twins), "calibrate", job, "--json", "--splits", "300"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["splits"] == 300 and len(document["groups"]) == 2
    for group in document["groups"]:
        assert group["cases"] == 40 and group["samples"] == 6
        assert group["false_flip_rate"] <= 0.12  # one dataset: near alpha = 0.05
        assert group["mde"] > 0


def test_calibrate_refuses_a_job_without_samples(twins, capsys):
    job = _job_of(twins, "test_once", capsys)
    assert main(["--store", str(twins), "calibrate", job]) == 1
    err = capsys.readouterr().err
    assert f"job {job}" in err and "samples >= 2" in err
    assert main(["--store", str(twins), "calibrate", job, "--splits", "0"]) == 1
    assert "--splits 0 must be at least 1" in capsys.readouterr().err
