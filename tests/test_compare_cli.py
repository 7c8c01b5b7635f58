"""`fxtr compare A B`: B against A per group, checked against numbers computed here."""

from __future__ import annotations

import json
import math

import pytest
from scipy import stats as scipy_stats

from fxtr.cli import main
from fxtr.store import open_store
from tests.viewer_jobs import make_eval_job


def case_means(store, job_id, model):
    """Per-case means of one model's scored cases, from the record (no fxtr code involved)."""
    out = {}
    for cell in store.get_job(job_id)["evaluation"]["cells"]:
        values = [v for v in cell["values"] if v is not None]
        if cell["group"]["model"] == model and cell["status"] == "ok" and values:
            out[cell["case"]["case"]] = sum(values) / len(values)
    return out


def paired(store, a, b, model):
    """The paired difference B - A over the shared cases, with its 95% t interval (scipy)."""
    before, after = case_means(store, a, model), case_means(store, b, model)
    keys = sorted(set(before) & set(after))
    diffs = [after[k] - before[k] for k in keys]
    mean = sum(diffs) / len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))
    half = scipy_stats.t.ppf(0.975, len(diffs) - 1) * sd / math.sqrt(len(diffs))
    return mean, mean - half, mean + half, len(diffs), before, after


@pytest.fixture
def jobs():
    store = open_store(".fxtr")
    a = make_eval_job(store, samples=3, regressions=10)
    b = make_eval_job(store, variant="better", samples=3, regressions=10, baseline=a.job_id)
    return store, a.job_id, b.job_id


def test_compare_prints_each_group_against_the_baseline(jobs, capsys):
    """Means, the paired delta with its interval, n paired, flips and the verdict per model."""
    store, a, b = jobs
    assert main(["compare", a[:6], "latest", "--json"]) == 0
    rows = {r["label"]: r for r in json.loads(capsys.readouterr().out)["groups"]}
    for model in ("small", "large"):
        delta, low, high, n, before, after = paired(store, a, b, model)
        row = rows[model]
        assert row["delta"] == pytest.approx(delta)
        assert row["low"] == pytest.approx(max(low, -1.0)) and row["high"] == pytest.approx(high)
        assert row["n_paired"] == n
        assert row["baseline_mean"] == pytest.approx(sum(before.values()) / len(before))
        assert row["run_mean"] == pytest.approx(sum(after.values()) / len(after))
        assert row["verdict"] == "regressed"  # the whole interval lies below 0
    assert rows["small"]["flipped"]["to_pass"] == ["hard"]
    assert sorted(rows["large"]["flipped"]["to_fail"]) == sorted(
        ["regress", *(f"regress{i}" for i in range(10))]
    )
    assert main(["compare", a, b]) == 0
    out = capsys.readouterr().out
    delta, low, high, n, _, _ = paired(store, a, b, "large")
    line = next(line for line in out.splitlines() if line.startswith("large"))
    assert f"{delta:+.3f}".rstrip("0") in line and "regressed" in line and f" {n} " in line
    assert "small: fail→pass: hard" in out and "large: pass→fail: regress, regress0" in out


def test_compare_exit_code_and_errors(jobs, capsys):
    """--fail-on-regression exits 1 on a regression; a non-eval job is a clear error."""
    store, a, b = jobs
    assert main(["compare", a, b, "--fail-on-regression"]) == 1
    assert main(["compare", b, b, "--fail-on-regression"]) == 0
    assert "no significant change" in capsys.readouterr().out
    store.put_job({"job_id": "plain", "workflow": "wf", "created_at": 1.0, "attempts": []})
    assert main(["compare", "plain", b]) == 1
    assert "job plain has no evaluation to compare" in capsys.readouterr().err
    assert main(["compare", a, b, "--margin", "-1"]) == 1
    assert "--margin -1.0 must be a number of at least 0" in capsys.readouterr().err
