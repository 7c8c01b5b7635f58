"""Samples, honest gates, baselines and the summary, driven by pytester.

Every number the plugin reports is checked against statistics computed here, independently
(scipy and statsmodels, or the formula written out), never against the plugin's own code.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import textwrap

import pytest

scipy_stats = pytest.importorskip("scipy.stats")
proportion = pytest.importorskip("statsmodels.stats.proportion")

EVAL = textwrap.dedent(
    """
    import json
    import os
    from typing import Annotated

    import pytest

    from fxtr import ArrayHandle, ScalarHandle, StepContext, WorkflowContext, step, workflow

    TABLE = json.loads(os.environ["SCORES"])
    VARIANT = os.environ["VARIANT"]
    MODELS = sorted(TABLE)
    CASES = sorted(TABLE[MODELS[0]])

    @step(name="g.score")
    async def score(context: StepContext, model: str, case: str, variant: str) -> float:
        assert variant == VARIANT
        values = TABLE[model][case]
        return values[context.sample or 0]

    @workflow(name="g.evaluate")
    async def evaluate(
        context: WorkflowContext,
        model: Annotated[ArrayHandle[str], "[model: str]"],
        case: Annotated[ArrayHandle[str], "[case: str]"],
        variant: ScalarHandle[str],
        samples: int = 1,
    ) -> Annotated[ArrayHandle[float], "[model: str, case: str, sample: int]"]:
        return context.run_step(
            "score", score, {{"model": model, "case": case, "variant": variant}},
            map_over=["model", "case"], samples=samples,
        )

    @pytest.mark.fxtr(evaluate, dims={{"model": "model", "case": "case"}},
                      inputs={{"variant": VARIANT{inputs}}}{marker})
    @pytest.mark.parametrize("model", MODELS)
    @pytest.mark.parametrize("case", CASES)
    def test_g(model, case, result):
        {body}
    """
)


def write(pytester, monkeypatch, table, *, inputs="", marker="", body="assert True"):
    """The eval over ``table`` ({model: {case: [value per sample]}})."""
    text = json.dumps(table, sort_keys=True)
    monkeypatch.setenv("SCORES", text)
    monkeypatch.setenv("VARIANT", hashlib.sha256(text.encode()).hexdigest()[:12])
    pytester.makepyfile(test_g=EVAL.format(inputs=inputs, marker=marker, body=body))


def report(pytester, name="r.json"):
    return json.loads((pytester.path / name).read_text())


def groups(doc):
    (job,) = doc["jobs"]
    return {tuple(sorted(g["group"].items())): g for g in job["scores"]}


def cases(prefix, values):
    """``{c00: [v], c01: [v], ...}``: one case per value (or per list of sample values)."""
    return {f"{prefix}{i:02d}": (v if isinstance(v, list) else [v]) for i, v in enumerate(values)}


@pytest.fixture(autouse=True)
def _ini(pytester, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def t_interval(values):
    n = len(values)
    mean = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(n)
    half = scipy_stats.t.ppf(0.975, n - 1) * se
    return mean, se, mean - half, mean + half


def test_binary_scores_get_the_wilson_interval(pytester, monkeypatch):
    """17 of 20 passing: mean 0.85, Wilson 0.6396-0.9476, interval kind `wilson`."""
    table = {"a": cases("c", [1.0] * 17 + [0.0] * 3), "b": cases("c", [1.0] * 5 + [0.0] * 15)}
    write(pytester, monkeypatch, table, marker=", threshold=0.8")
    result = pytester.runpytest("--fxtr-report", "r.json")
    assert result.ret == 1
    got = groups(report(pytester))
    for model, passed in (("a", 17), ("b", 5)):
        g = got[(("model", model),)]
        low, high = proportion.proportion_confint(passed, 20, alpha=0.05, method="wilson")
        assert g["interval"] == "wilson"
        assert g["n"] == 20 and g["missing"] == 0
        assert g["mean"] == pytest.approx(passed / 20)
        assert (g["low"], g["high"]) == (pytest.approx(low, abs=1e-9), pytest.approx(high))
    assert got[(("model", "a"),)]["low"] == pytest.approx(0.6396, abs=5e-5)
    assert got[(("model", "a"),)]["passed"] is True
    assert got[(("model", "b"),)]["passed"] is False
    result.stdout.fnmatch_lines(
        [
            "group*mean*95% CI*interval*n*missing*threshold*gate",
            "model=a*0.850*[[]0.640, 0.948[]]*wilson*20*0*0.800*pass",
            "model=b*0.250*wilson*20*0*0.800*FAIL",
        ]
    )
    assert result.stdout.lines[-2].startswith("fxtr: score gate failed for test_g.py::test_g")


def test_other_scores_get_the_t_interval_inside_the_range(pytester, monkeypatch):
    """Non-binary scores: the t interval on n-1 df, never outside the scores' range."""
    values = [0.2, 0.9, 0.5, 0.7, 1.0, 0.4, 0.6, 0.8]
    table = {"a": cases("c", values), "b": cases("c", [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.9])}
    write(pytester, monkeypatch, table)
    assert pytester.runpytest("--fxtr-report", "r.json").ret == 0
    got = groups(report(pytester))
    a = got[(("model", "a"),)]
    mean, se, low, high = t_interval(values)
    assert a["interval"] == "t"
    assert a["mean"] == pytest.approx(mean)
    assert a["stderr"] == pytest.approx(se)
    assert (a["low"], a["high"]) == (pytest.approx(low), pytest.approx(high))
    b = got[(("model", "b"),)]
    assert b["high"] <= 1.0 and b["low"] >= 0.0


CLUSTERED = textwrap.dedent(
    """
    import json
    import os
    from typing import Annotated

    import pytest

    from fxtr import ArrayHandle, Entity, StepContext, WorkflowContext, step, workflow

    VALUES = json.loads(os.environ["VALUES"])
    TOPICS = json.loads(os.environ["TOPICS"])

    class Case(Entity):
        id: str
        metadata: dict

    CASES = [Case(id=f"c{i}", metadata={"topic": t}) for i, t in enumerate(TOPICS)]

    @step(name="k.score")
    async def score(context: StepContext, case: Case, topic: str) -> float:
        if not isinstance(case, Case):  # the engine passed the reference
            case = await context.load(case)
        assert topic == case.metadata["topic"]
        return VALUES[int(case.id[1:])]

    @workflow(name="k.evaluate")
    async def evaluate(
        context: WorkflowContext,
        case: Annotated[ArrayHandle[Case], "[case: str]"],
        topic: Annotated[ArrayHandle[str], "[case: str]"],
    ) -> Annotated[ArrayHandle[float], "[case: str]"]:
        return context.run_step("score", score, {"case": case, "topic": topic},
                                map_over=["case"])

    @pytest.mark.fxtr(evaluate, dims={"case": ("case", "topic")}, cluster=FIELD)
    @pytest.mark.parametrize("case,topic", [(c, c.metadata["topic"]) for c in CASES],
                             ids=[f"{c.id}-{c.metadata['topic']}" for c in CASES])
    def test_k(case, topic, result):
        assert result >= 0
    """
)


@pytest.mark.parametrize("field", ["topic", "metadata-topic"])
def test_cluster_gives_a_clustered_t_interval(pytester, monkeypatch, field):
    """cluster=: Miller's clustered standard error (eq. 4) times C/(C-1), t on C-1 df.

    The field is a parametrized argument (`topic`) or a key of a case's `metadata`.
    """
    values = [0.9, 0.8, 0.1, 0.2, 0.6, 0.5, 0.7, 0.3, 0.4]
    topics = ["x", "x", "y", "y", "z", "z", "w", "w", "w"]
    monkeypatch.setenv("VALUES", json.dumps(values))
    monkeypatch.setenv("TOPICS", json.dumps(topics))
    source = CLUSTERED.replace("cluster=FIELD", 'cluster="topic"')
    if field == "metadata-topic":  # `topic` is no argument: the Case's metadata has it
        source = source.replace('cluster="topic"', 'cluster="kind"').replace(
            'metadata={"topic": t}', 'metadata={"topic": t, "kind": t}'
        )
    pytester.makepyfile(test_k=source)
    result = pytester.runpytest("--fxtr-report", "r.json")
    assert result.ret == 0, result.stdout.str()
    (g,) = groups(report(pytester)).values()
    n = len(values)
    mean = statistics.fmean(values)
    sums: dict[str, float] = {}
    for v, t in zip(values, topics, strict=True):
        sums[t] = sums.get(t, 0.0) + (v - mean)
    c = len(sums)
    se = math.sqrt(c / (c - 1) * sum(s * s for s in sums.values())) / n
    half = scipy_stats.t.ppf(0.975, c - 1) * se
    assert g["interval"] == "clustered-t"
    assert g["mean"] == pytest.approx(mean)
    assert g["stderr"] == pytest.approx(se)
    assert (g["low"], g["high"]) == (
        pytest.approx(max(0.0, mean - half)),
        pytest.approx(min(1.0, mean + half)),
    )
    result.stdout.fnmatch_lines(["all cases*clustered-t*9*0*"])


def test_cluster_naming_no_field_is_a_usage_error(pytester, monkeypatch):
    """cluster= naming a field no case has: an error naming the marker and the fix."""
    write(pytester, monkeypatch, {"a": cases("c", [1.0, 0.0])}, marker=', cluster="topic"')
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*@pytest.mark.fxtr on test_g.py::test_g: cluster='topic', but case 'c00' has no field*"]
    )


SAMPLED = {
    "a": {
        "c1": [1.0, 1.0, 1.0, 1.0],
        "c2": [1.0, 0.0, 1.0, 0.0],
        "c3": [0.0] * 4,
        "c4": [1.0, 1.0, 0.0, 1.0],
    },
    "b": {"c1": [1.0] * 4, "c2": [1.0] * 4, "c3": [0.0, 0.0, 0.0, 1.0], "c4": [1.0] * 4},
}


def test_samples_reduce_per_case_then_verdicts_and_pass_at_k(pytester, monkeypatch):
    """Each item gets an Array over `sample`; the mean is over cases; k/n, verdicts, pass@k."""
    write(
        pytester,
        monkeypatch,
        SAMPLED,
        inputs=', "samples": 4',
        body='assert result.dims == ("sample",) and list(result.keys("sample")) == [0, 1, 2, 3]',
    )
    result = pytester.runpytest("--fxtr-report", "r.json")
    result.assert_outcomes(passed=8)
    doc = report(pytester)
    assert len(doc["jobs"][0]["invocations"]) == 2 * 4 * 4
    got = groups(doc)
    for model, table in SAMPLED.items():
        g = got[(("model", model),)]
        per_case = [statistics.fmean(v) for v in table.values()]
        mean, se, _, _ = t_interval(per_case)
        assert g["n"] == 4, "a group's n counts cases, never samples"
        assert g["mean"] == pytest.approx(mean)
        assert g["stderr"] == pytest.approx(se)
        verdicts = {
            case: ("stable_pass" if sum(v) == 4 else "stable_fail" if sum(v) == 0 else "flaky")
            for case, v in table.items()
        }
        reported = {_case_name(k): c for k, c in g["cases"].items()}
        assert {k: c["verdict"] for k, c in reported.items()} == verdicts
        assert {k: (c["k"], c["n"]) for k, c in reported.items()} == {
            case: (int(sum(v)), 4) for case, v in table.items()
        }
        for k in range(1, 5):
            at = [1 - math.comb(4 - int(sum(v)), k) / math.comb(4, k) for v in table.values()]
            hat = [math.comb(int(sum(v)), k) / math.comb(4, k) for v in table.values()]
            entry = g["pass_at"][str(k)]
            assert entry["value"] == pytest.approx(statistics.fmean(at))
            assert entry["stderr"] == pytest.approx(statistics.stdev(at) / 2)
            assert g["pass_hat"][str(k)]["value"] == pytest.approx(statistics.fmean(hat))
    result.stdout.fnmatch_lines(
        ["pass@k*(model=a)*@1*", "flaky (model=a): 2 of 4: c2, c4", "flaky (model=b): 1 of 4: c3"]
    )


def _case_name(key):
    if isinstance(key, str) and key.startswith(("{", "[")):
        key = json.loads(key)
    if isinstance(key, list):
        key = dict(key)
    return key["case"] if isinstance(key, dict) else key


def test_fxtr_samples_overrides_the_samples_input(pytester, monkeypatch):
    """--fxtr-samples K (and its ini twin) replaces the marker's `samples`: K per case ran."""
    write(pytester, monkeypatch, SAMPLED, inputs=', "samples": 2')
    pytester.runpytest("--fxtr-report", "r.json", "--fxtr-samples", "3")
    assert len(report(pytester)["jobs"][0]["invocations"]) == 2 * 4 * 3
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\nfxtr_samples = 4\n")
    result = pytester.runpytest("--fxtr-report", "r.json")
    result.stdout.fnmatch_lines(["fxtr: *samples=4*"])
    invocations = report(pytester)["jobs"][0]["invocations"]
    assert len(invocations) == 32
    assert sum(not i["from_cache"] for i in invocations) == 8, "samples 0..2 came from the cache"


def test_fxtr_samples_is_validated(pytester, monkeypatch):
    write(pytester, monkeypatch, SAMPLED)
    result = pytester.runpytest("--fxtr-samples", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fxtr-samples must be a positive whole number, got '0'.*"])


BASE = {"a": cases("c", [1.0] * 10), "b": cases("c", [1.0] * 8 + [0.0] * 2)}
WORSE = {"a": cases("c", [1.0] * 3 + [0.0] * 7), "b": cases("c", [1.0] * 7 + [0.0] * 3)}


def paired(before, after):
    """The paired difference (after - before) with its t interval, kept inside [-1, 1]."""
    diffs = [a[0] - b[0] for a, b in zip(after.values(), before.values(), strict=True)]
    delta, se, low, high = t_interval(diffs)
    return delta, se, max(-1.0, low), min(1.0, high)


def test_baseline_latest_catches_a_regression_and_not_a_fluctuation(pytester, monkeypatch):
    """--fxtr-baseline latest: model a regressed (exit 1, said last), model b not significant."""
    write(pytester, monkeypatch, BASE)
    first = pytester.runpytest("--fxtr-report", "r1.json")
    assert first.ret == 0
    write(pytester, monkeypatch, WORSE)
    # without overwrite every case awaits review (its items fail, the groups count them
    # missing), and that job, where nothing was scored, is no baseline for `latest`
    review = pytester.runpytest("--fxtr-baseline", "latest")
    assert review.ret == 1
    review.stdout.fnmatch_lines(["model=a*-*-*-*0*10*"])
    result = pytester.runpytest(
        "--fxtr-baseline",
        "latest",
        "--fxtr-cache-conflict",
        "overwrite",
        "--fxtr-report",
        "r2.json",
    )
    assert result.ret == 1
    result.assert_outcomes(passed=20)
    got = groups(report(pytester, "r2.json"))
    base_id = report(pytester, "r1.json")["jobs"][0]["job_id"]
    for model, verdict in (("a", "regressed"), ("b", "no significant change")):
        b = got[(("model", model),)]["baseline"]
        delta, se, low, high = paired(BASE[model], WORSE[model])
        assert b["verdict"] == verdict
        assert b["job_id"] == base_id
        assert b["n_paired"] == 10
        assert b["delta"] == pytest.approx(delta)
        assert b["stderr"] == pytest.approx(se)
        assert (b["low"], b["high"]) == (pytest.approx(low), pytest.approx(high))
        assert b["mean"] == pytest.approx(statistics.fmean(v[0] for v in BASE[model].values()))
    flipped = got[(("model", "a"),)]["baseline"]["flipped"]
    assert sorted(_case_name(k) for k in flipped["to_fail"]) == [f"c{i:02d}" for i in range(3, 10)]
    assert flipped["to_pass"] == []
    delta, _, low, high = paired(BASE["a"], WORSE["a"])
    result.stdout.fnmatch_lines(
        [
            "group*base*this*diff*95% CI*n*flips*mde*verdict",
            f"model=a*1.000*0.300*{delta:+.3f}*[[]{low:.3f}, {high:.3f}[]]*10*-7/+0*regressed",
            "model=b*0.800*0.700*-0.100*10*-1/+0*no significant change",
        ]
    )
    last = result.stdout.lines[-2]
    assert last == (
        f"fxtr: regression in test_g.py::test_g (model=a): 1.000 -> 0.300, diff {delta:+.3f}, "
        f"95% CI [{low:.3f}, {high:.3f}], 10 paired cases, vs job {base_id}"
    )
    # the gate's outcome is in the job record
    from fxtr.store import open_store

    job_id = report(pytester, "r2.json")["jobs"][0]["job_id"]
    evaluation = open_store(pytester.path / ".fxtr").get_job(job_id)["evaluation"]
    assert evaluation["gate"] == {"passed": False, "failed": [], "regressed": ["model=a"]}
    assert evaluation["baseline"] == {"job_id": base_id, "source": "store"}
    assert evaluation["eval"] == "test_g.py::test_g"
    assert evaluation["sample_dim"] == "sample" and evaluation["group_dims"] == ["model"]
    cell = next(
        c
        for c in evaluation["cells"]
        if c["group"] == {"model": "a"} and c["case"]["case"] == "c05"
    )
    assert cell["values"] == [0.0] and cell["status"] == "ok"
    assert cell["addresses"] and all("case=c05" in a for a in cell["addresses"])


def test_baseline_from_a_job_prefix_or_a_report_file(pytester, monkeypatch):
    """A unique prefix and a --fxtr-report file name the same baseline; margins widen it."""
    write(pytester, monkeypatch, BASE)
    pytester.runpytest("--fxtr-report", "r1.json")
    base_id = report(pytester, "r1.json")["jobs"][0]["job_id"]
    assert report(pytester, "r1.json")["jobs"][0]["cells"]
    write(pytester, monkeypatch, WORSE)
    overwrite = ("--fxtr-cache-conflict", "overwrite")
    by_prefix = pytester.runpytest("--fxtr-baseline", base_id[:12], *overwrite)
    assert by_prefix.ret == 1
    by_file = pytester.runpytest("--fxtr-baseline", "r1.json", "--fxtr-report", "r2.json")
    assert by_file.ret == 1
    b = groups(report(pytester, "r2.json"))[(("model", "a"),)]["baseline"]
    assert b["verdict"] == "regressed" and b["job_id"] == base_id
    # a margin past the low end of the interval: not a regression any more
    _, _, low, _ = paired(BASE["a"], WORSE["a"])
    margin = f"{-low + 0.01:.3f}"
    wide = pytester.runpytest("--fxtr-baseline", "r1.json", "--fxtr-baseline-margin", margin)
    assert wide.ret == 0, wide.stdout.str()
    wide.stdout.fnmatch_lines([f"fxtr: *baseline=r1.json (margin {float(margin):g})*"])


def test_bad_baselines_are_usage_errors_and_a_first_run_has_none(pytester, monkeypatch):
    """A job that does not exist is an error before anything runs; `latest` with no earlier
    job is a note, not a failure."""
    write(pytester, monkeypatch, BASE)
    first = pytester.runpytest("--fxtr-baseline", "latest")
    assert first.ret == 0
    first.stdout.fnmatch_lines(
        ["fxtr: no baseline: no earlier job of test_g.py::test_g has a complete evaluation"]
    )
    missing = pytester.runpytest("--fxtr-baseline", "nosuchjob")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--fxtr-baseline nosuchjob: No job 'nosuchjob'*"])
    nofile = pytester.runpytest("--fxtr-baseline", "gone.json")
    assert nofile.ret == pytest.ExitCode.USAGE_ERROR
    nofile.stderr.fnmatch_lines(["*--fxtr-baseline gone.json: no such file*"])
    margin = pytester.runpytest("--fxtr-baseline-margin", "-0.1")
    assert margin.ret == pytest.ExitCode.USAGE_ERROR


def test_quiet_summary_is_one_line_per_job_and_the_gate_is_last(pytester, monkeypatch):
    """-q: one line per job (status, cost, gate); the failed gate on its own, last."""
    write(pytester, monkeypatch, BASE, marker=", threshold=0.9")
    result = pytester.runpytest("-q", "--fxtr-report", "r.json")
    assert result.ret == 1
    job_id = report(pytester)["jobs"][0]["job_id"]
    section = result.stdout.str().split("fxtr summary", 1)[1].splitlines()[1:]
    lines = [line for line in section if line.strip()]
    assert lines[0] == f"fxtr: {job_id} · g.evaluate · succeeded · $0.0000 · gate failed"
    assert lines[1].startswith("fxtr: score gate failed for test_g.py::test_g (model=b): ")
    assert "mean 0.800 < threshold 0.900" in lines[1]
    assert len(lines) == 3 and "passed" in lines[2]


def test_summary_fits_in_100_columns(pytester, monkeypatch):
    """The whole fxtr summary, baseline and flaky cases included, is at most 100 wide."""
    write(pytester, monkeypatch, SAMPLED, inputs=', "samples": 4', marker=", threshold=0.9")
    pytester.runpytest()
    changed = {m: {c: [1.0 - x for x in v] for c, v in t.items()} for m, t in SAMPLED.items()}
    write(pytester, monkeypatch, changed, inputs=', "samples": 4', marker=", threshold=0.9")
    result = pytester.runpytest(
        "--fxtr-baseline", "latest", "--fxtr-cache-conflict", "overwrite", "-p", "no:cacheprovider"
    )
    out = result.stdout.str()
    section = out.split("fxtr summary", 1)[1].split("short test summary", 1)[0]
    body = [line for line in section.splitlines()[1:] if not line.startswith("fxtr: score gate")]
    body = [line for line in body if not line.startswith("fxtr: regression")]
    assert body and max(len(line) for line in body) <= 100, "\n".join(body)
    assert "flaky (model=a)" in out and "verdict" in out


def test_markdown_to_a_file_and_to_github_step_summary(pytester, monkeypatch):
    """--fxtr-markdown and $GITHUB_STEP_SUMMARY get groups, gates, baseline and flaky cases."""
    write(pytester, monkeypatch, BASE)
    pytester.runpytest()
    write(pytester, monkeypatch, WORSE)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "step.md"))
    (pytester.path / "step.md").write_text("earlier step\n")
    pytester.runpytest(
        "--fxtr-baseline",
        "latest",
        "--fxtr-cache-conflict",
        "overwrite",
        "--fxtr-markdown",
        "out/summary.md",
    )
    text = (pytester.path / "out" / "summary.md").read_text()
    assert (pytester.path / "step.md").read_text() == "earlier step\n" + text
    assert "### `test_g.py::test_g` (g.evaluate): gate **failed**" in text
    assert "| group | mean | 95% CI | interval | n | missing | threshold | gate |" in text
    assert "| model=a | 0.300 | [" in text
    assert "| regressed |" in text and "| no significant change |" in text
    assert text.rstrip().splitlines()[-1].startswith("**fxtr: regression in test_g.py::test_g")


def test_markdown_path_that_is_a_directory_is_a_usage_error(pytester, monkeypatch):
    write(pytester, monkeypatch, BASE)
    (pytester.path / "adir").mkdir()
    result = pytester.runpytest("--fxtr-markdown", "adir")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--fxtr-markdown */adir is a directory*"])


def test_exit_first_still_scores_every_computed_cell(pytester, monkeypatch):
    """With -x the run stops at the first failing item; groups still count every cell."""
    write(pytester, monkeypatch, BASE, body="assert result[0] > 0.5")
    result = pytester.runpytest("-x", "--fxtr-report", "r.json")
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] == 1 and outcomes["passed"] < 19
    got = groups(report(pytester))
    assert got[(("model", "a"),)]["n"] == 10 and got[(("model", "b"),)]["n"] == 10
    assert got[(("model", "b"),)]["mean"] == pytest.approx(0.8)


def test_unpriced_models_show_n_a_and_the_judge_is_labelled(pytester):
    """A model with no price costs `n/a`, never $0.0000; a judge's calls are labelled."""
    pytester.makepyfile(
        test_cost="""
        import pytest
        from typing import Annotated
        from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow
        from fxtr.models import ContentText, MockModelAPI, ModelRequest, UserMessage
        from fxtr.tracing._recorder import call_role

        SUBJECT = MockModelAPI("nobody-prices-this-model", "an answer")
        JUDGE = MockModelAPI("gpt-4o-mini", "GRADE: C")

        @step(name="c.ask")
        async def ask(context: StepContext, q: str) -> float:
            request = ModelRequest(context=(UserMessage(content=(ContentText(text=q),)),))
            await SUBJECT.generate(request)
            token = call_role.set("judge")
            try:
                await JUDGE.generate(request)
            finally:
                call_role.reset(token)
            return 1.0

        @workflow(name="c.wf")
        async def wf(context: WorkflowContext, q: Annotated[ArrayHandle[str], "[case: str]"]
                     ) -> Annotated[ArrayHandle[float], "[case: str]"]:
            return context.run_step("ask", ask, {"q": q}, map_over=["case"])

        @pytest.mark.fxtr(wf)
        @pytest.mark.parametrize("q", ["one", "two"])
        def test_cost(q, result):
            assert result == 1.0
        """
    )
    result = pytester.runpytest("-W", "ignore::UserWarning")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "model*calls*in tokens*out tokens*cost*saved by cache",
            "nobody-prices-this-model*2*n/a*n/a",
            "gpt-4o-mini (judge)*2*$0.0000*",
            "total*4*$0.0000* + n/a*",
        ]
    )
    assert "nobody-prices-this-model  *$0.0000" not in result.stdout.str()


def test_entities_name_themselves_in_node_ids(pytester):
    """pytest_make_parametrize_id: a value whose type has __fxtr_id__ gets that id."""
    pytester.makepyfile(
        test_ids="""
        import pytest

        class Entity:
            def __init__(self, name):
                self.name = name

            def __fxtr_id__(self):
                return f"id-{self.name}"

        @pytest.mark.parametrize("e", [Entity("x"), Entity("y")])
        def test_e(e):
            pass

        @pytest.mark.parametrize("n", [object()])
        def test_plain(n):
            pass
        """
    )
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_ids.py::test_e[[]id-x[]]", "test_ids.py::test_e[[]id-y[]]"])
    result.stdout.fnmatch_lines(["test_ids.py::test_plain[[]n0[]]"])


assert os.sep  # the tests use POSIX paths in messages


def test_keys_with_address_syntax_keep_their_cells(pytester, monkeypatch):
    """Ids with `/`, `,`, `=`, quotes, spaces and brackets: every item gets its own value,
    and every cell of the evaluation finds its invocations."""
    names = ["a/b", "x,y", 'q"t', "k=v", "sp ace", "br[1]"]
    table = {"m": {n: [float(i % 2)] for i, n in enumerate(names)}}
    write(pytester, monkeypatch, table, body="assert result[0] == TABLE[model][case][0]")
    result = pytester.runpytest("--fxtr-report", "r.json")
    result.assert_outcomes(passed=6)
    (job,) = report(pytester)["jobs"]
    assert sorted(c["case"]["case"] for c in job["cells"]) == sorted(names)
    for cell in job["cells"]:
        assert cell["status"] == "ok" and len(cell["addresses"]) == 1, cell
    (g,) = groups(report(pytester)).values()
    assert g["n"] == 6 and g["mean"] == pytest.approx(0.5)


def test_the_judge_stays_labelled_when_served_from_the_cache(pytester):
    """A rerun served from the cache still shows the judge's model as the judge."""
    pytester.makepyfile(
        test_judge="""
        import pytest
        from typing import Annotated
        from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow
        from fxtr.models import ContentText, MockModelAPI, ModelRequest, UserMessage
        from fxtr.tracing._recorder import call_role

        JUDGE = MockModelAPI("gpt-4o-mini", "GRADE: C")

        @step(name="j.grade")
        async def grade(context: StepContext, q: str) -> float:
            request = ModelRequest(context=(UserMessage(content=(ContentText(text=q),)),))
            token = call_role.set("judge")
            try:
                await JUDGE.generate(request)
            finally:
                call_role.reset(token)
            return 1.0

        @workflow(name="j.wf")
        async def wf(context: WorkflowContext, q: Annotated[ArrayHandle[str], "[case: str]"]
                     ) -> Annotated[ArrayHandle[float], "[case: str]"]:
            return context.run_step("grade", grade, {"q": q}, map_over=["case"])

        @pytest.mark.fxtr(wf)
        @pytest.mark.parametrize("q", ["one", "two"])
        def test_judge(q, result):
            assert result == 1.0
        """
    )
    pytester.runpytest().assert_outcomes(passed=2)
    again = pytester.runpytest()
    again.stdout.fnmatch_lines(["j.grade*2*0*2*", "gpt-4o-mini (judge)*0*0*0*$0.0000*$0.0000*"])
