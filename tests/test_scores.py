"""fxtr.scores on hand-built cells, checked against computations written out in the tests."""

import itertools
import json
import math

import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.proportion import proportion_confint

from fxtr.scores import (
    FLAKY,
    STABLE_FAIL,
    STABLE_PASS,
    CaseScore,
    case_scores,
    compare,
    group_statistics,
    key_of,
    label,
    report_groups,
)


def cell(case, values, *, model="m", status="ok", **extra_case):
    return {"group": {"model": model}, "case": {"case": case, **extra_case},
            "values": list(values), "status": status, "addresses": []}


def group(cells, model="m"):
    return case_scores(cells)[key_of({"model": model})]


def t_interval(values, confidence=0.95):
    x = np.asarray(values, float)
    return scipy.stats.t.interval(confidence, len(x) - 1, loc=x.mean(), scale=scipy.stats.sem(x))


def clustered_se(values, clusters):
    """inspect_ai's clustered stderr, written out independently."""
    x, g = np.asarray(values, float), np.asarray(clusters)
    mean = x.mean()
    between = sum(((x[g == c] - mean).sum()) ** 2 for c in np.unique(g))
    c = len(np.unique(g))
    return math.sqrt(between * c / (c - 1)) / len(x)


# --------------------------------------------------------------------------- keys and cases


def test_keys_are_sorted_pairs_and_labels_read_well():
    key = key_of({"model": "a", "lang": "en"})
    assert key == (("lang", "en"), ("model", "a"))
    assert dict(key) == {"model": "a", "lang": "en"}
    assert label(key) == "lang=en,model=a"
    assert label(key_of({"case": "c1"})) == "c1"
    hash(key)


def test_case_scores_reduce_samples_to_their_mean():
    cases = group([
        cell("c1", [1.0, 0.0, 1.0, 1.0]),
        cell("c2", [0.0, 0.0, 0.0, 0.0]),
        cell("c3", [True, True, True, True]),
        cell("c4", [1, None, 0, 1]),
        cell("c5", [None, None, None, None]),
        cell("c6", [None, None, None, None], status="missing"),
        cell("c7", [1.0, 1.0, 1.0, 1.0], status="missing"),
    ])
    by = {label(k): cs for k, cs in cases.items()}
    assert list(by) == ["c1", "c2", "c3", "c4", "c5", "c6", "c7"]
    assert by["c1"] == CaseScore(0.75, 4, 4, 3, FLAKY, True, True)
    assert (by["c2"].value, by["c2"].k, by["c2"].verdict) == (0.0, 0, STABLE_FAIL)
    assert (by["c3"].value, by["c3"].k, by["c3"].verdict) == (1.0, 4, STABLE_PASS)
    assert (by["c4"].value, by["c4"].n, by["c4"].samples) == (pytest.approx(2 / 3), 3, 4)
    assert by["c4"].incomplete and not by["c4"].missing and by["c4"].verdict == FLAKY
    for name in ("c5", "c6", "c7"):
        assert by[name].missing and by[name].value is None and by[name].verdict is None


def test_one_fractional_value_anywhere_makes_the_score_non_binary():
    cells = [cell("c1", [1.0, 0.0]), cell("c2", [1.0, 1.0], model="other"),
             cell("c3", [0.5, 1.0], model="other")]
    scores = case_scores(cells)
    for cases in scores.values():
        for cs in cases.values():
            assert (cs.binary, cs.k, cs.verdict) == (False, None, None)
            assert cs.unit
    assert not case_scores([cell("c1", [2.0])])[key_of({"model": "m"})][
        key_of({"case": "c1"})].unit


def test_case_scores_reject_duplicates_and_non_numbers():
    with pytest.raises(ValueError, match="appears twice in group"):
        case_scores([cell("c1", [1.0]), cell("c1", [0.0])])
    with pytest.raises(ValueError, match="'yes'.*finite numbers"):
        case_scores([cell("c1", [1.0, "yes"])])
    with pytest.raises(ValueError, match="nan.*finite numbers"):
        case_scores([cell("c1", [math.nan])])


# --------------------------------------------------------------------------- intervals


def test_binary_single_sample_groups_get_wilson():
    values = [1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1]
    stats = group_statistics(group([cell(f"c{i}", [v]) for i, v in enumerate(values)]))
    low, high = proportion_confint(17, 20, method="wilson")
    assert stats["interval"] == "wilson"
    assert (stats["low"], stats["high"]) == pytest.approx((low, high), abs=1e-12)
    assert (round(stats["low"], 4), round(stats["high"], 4)) == (0.6396, 0.9476)
    assert stats["mean"] == 0.85 and stats["n"] == 20 and stats["binary"]
    assert stats["cases"] == {} and stats["pass_at"] == {}  # no samples: nothing per case


def test_stable_cases_with_samples_get_wilson_and_never_a_zero_width_interval():
    stats = group_statistics(group([cell(f"c{i}", [1.0] * 5) for i in range(20)]))
    assert stats["interval"] == "wilson"
    assert stats["high"] == 1.0
    assert stats["low"] == pytest.approx(proportion_confint(20, 20, method="wilson")[0])


def test_flaky_binary_cases_get_the_t_interval_over_case_means_clipped_to_0_1():
    samples = [[1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    stats = group_statistics(group([cell(f"c{i}", s) for i, s in enumerate(samples)]))
    means = [1.0, 1.0, 0.8, 1.0]
    low, high = t_interval(means)
    assert high > 1  # the unclipped t interval leaves the score's range...
    assert stats["interval"] == "t"
    assert stats["low"] == pytest.approx(low, rel=1e-10)
    assert stats["high"] == 1.0  # ...the reported one does not
    assert stats["mean"] == pytest.approx(0.95)
    assert stats["stderr"] == pytest.approx(scipy.stats.sem(means), rel=1e-10)
    assert stats["range"] == [0.0, 1.0]


def test_the_old_summary_bug_an_interval_past_1_for_a_0_1_score():
    """`[0.408, 1.192]` was the normal interval of a 0/1 score; it now stays inside [0, 1]."""
    stats = group_statistics(group([cell("a", [1]), cell("b", [1]), cell("c", [0])]))
    assert 0.0 <= stats["low"] <= stats["mean"] <= stats["high"] <= 1.0
    assert stats["interval"] == "wilson"


def test_unbounded_scores_get_the_plain_t_interval():
    values = [3.5, -1.0, 7.25, 2.0, 10.0]
    stats = group_statistics(group([cell(f"c{i}", [v]) for i, v in enumerate(values)]))
    assert stats["interval"] == "t" and stats["range"] is None and not stats["binary"]
    assert (stats["low"], stats["high"]) == pytest.approx(t_interval(values), rel=1e-10)
    low90, high90 = t_interval(values, 0.9)
    stats90 = group_statistics(group([cell(f"c{i}", [v]) for i, v in enumerate(values)]),
                               confidence=0.9)
    assert (stats90["low"], stats90["high"]) == pytest.approx((low90, high90), rel=1e-10)


def test_explicit_bounds_clip_and_decide_against_wilson():
    values = [0.0, 1.0, 1.0, 1.0]
    cases = group([cell(f"c{i}", [v]) for i, v in enumerate(values)])
    stats = group_statistics(cases, bounds=(0.0, 10.0))
    assert stats["interval"] == "t" and stats["range"] == [0.0, 10.0]
    assert stats["low"] == 0.0  # t's -0.05 clipped
    assert stats["high"] == pytest.approx(t_interval(values)[1], rel=1e-10)
    with pytest.raises(ValueError, match="bounds"):
        group_statistics(cases, bounds=(1.0, 0.0))
    with pytest.raises(ValueError, match="confidence"):
        group_statistics({}, confidence=95)
    with pytest.raises(ValueError, match="confidence"):
        compare([], [], confidence=0)


def test_clusters_give_the_clustered_t_interval():
    values = [0.9, 0.8, 0.85, 0.2, 0.3, 0.1, 0.6, 0.65]
    docs = ["d1", "d1", "d1", "d2", "d2", "d2", "d3", "d3"]
    cells = [cell(f"c{i}", [v]) for i, v in enumerate(values)]
    clusters = {key_of({"case": f"c{i}"}): d for i, d in enumerate(docs)}
    stats = group_statistics(group(cells), clusters=clusters)
    se = clustered_se(values, docs)
    half = scipy.stats.t.ppf(0.975, 2) * se
    mean = sum(values) / len(values)
    assert stats["interval"] == "clustered-t" and stats["clusters"] == 3
    assert stats["stderr"] == pytest.approx(se, rel=1e-12)
    assert stats["low"] == pytest.approx(max(0.0, mean - half), rel=1e-10)
    assert stats["high"] == pytest.approx(min(1.0, mean + half), rel=1e-10)
    with pytest.raises(ValueError, match="'c0' has no cluster label"):
        group_statistics(group(cells), clusters={})


def test_one_case_and_no_case():
    one = group_statistics(group([cell("c1", [0.4, 0.6])]))
    assert (one["mean"], one["n"], one["stderr"], one["low"], one["high"]) == (
        0.5, 1, None, None, None)
    nothing = group_statistics(group([cell("c1", [None], status="missing")]), threshold=0.5)
    assert (nothing["mean"], nothing["n"], nothing["missing"], nothing["interval"]) == (
        None, 0, 1, None)
    assert nothing["passed"] is False


# --------------------------------------------------------------------------- gate


def test_gate_mean_at_threshold_passes_and_missing_or_incomplete_fail():
    exact = group([cell(f"c{i}", [v]) for i, v in enumerate([1, 1, 1, 1, 0])])
    assert group_statistics(exact, threshold=0.8)["passed"]
    assert not group_statistics(exact, threshold=0.81)["passed"]
    assert group_statistics(exact)["passed"]  # no threshold, no gate
    rounding = group([cell("a", [0.7]), cell("b", [0.9])])
    assert group_statistics(rounding, threshold=0.8)["passed"]
    with_missing = group([cell("a", [1.0]), cell("b", [None], status="missing")])
    stats = group_statistics(with_missing, threshold=0.5)
    assert (stats["mean"], stats["missing"], stats["passed"]) == (1.0, 1, False)
    incomplete = group([cell("a", [1.0, None]), cell("b", [1.0, 1.0])])
    stats = group_statistics(incomplete, threshold=0.5)
    assert (stats["incomplete"], stats["missing"], stats["passed"]) == (1, 0, False)


# --------------------------------------------------------------------------- pass@k


def test_pass_at_k_and_pass_hat_k_per_group_against_the_formula():
    samples = {"c1": [1, 0, 1, 1, 0], "c2": [0, 0, 0, 0, 0], "c3": [1, 1, 1, 1, 1],
               "c4": [1, 0, 0, 0, 0], "c5": [1, 1, None, 0, 1], "c6": [0, 1, 0, 1, 1]}
    stats = group_statistics(group([cell(c, s) for c, s in samples.items()]))
    counts = {c: (sum(v is not None for v in s), sum(v == 1 for v in s))
              for c, s in samples.items()}
    assert min(n for n, _ in counts.values()) == 4
    assert sorted(stats["pass_at"]) == [1, 2, 3, 4]
    for k in range(1, 5):
        at = [1 - math.comb(n - c, k) / math.comb(n, k) for n, c in counts.values()]
        hat = [math.comb(c, k) / math.comb(n, k) for n, c in counts.values()]
        for got, want in ((stats["pass_at"][k], at), (stats["pass_hat"][k], hat)):
            assert got["value"] == pytest.approx(np.mean(want), rel=1e-12)
            assert got["stderr"] == pytest.approx(np.std(want, ddof=1) / math.sqrt(6),
                                                  rel=1e-10)
    assert stats["cases"]["c5"] == {"k": 3, "n": 4, "verdict": FLAKY}
    assert stats["cases"]["c2"] == {"k": 0, "n": 5, "verdict": STABLE_FAIL}
    assert stats["cases"]["c3"] == {"k": 5, "n": 5, "verdict": STABLE_PASS}
    assert stats["flaky"] == ["c1", "c4", "c5", "c6"]
    assert stats["pass_at"][1]["value"] == pytest.approx(stats["mean"])


def test_pass_at_k_clustered_stderr():
    samples = [[1, 0, 1], [1, 1, 1], [0, 0, 1], [0, 0, 0], [1, 1, 0], [1, 0, 0]]
    docs = ["x", "x", "y", "y", "z", "z"]
    cells = [cell(f"c{i}", s) for i, s in enumerate(samples)]
    clusters = {key_of({"case": f"c{i}"}): d for i, d in enumerate(docs)}
    stats = group_statistics(group(cells), clusters=clusters)
    at2 = [1 - math.comb(3 - sum(s), 2) / math.comb(3, 2) for s in samples]
    assert stats["pass_at"][2]["value"] == pytest.approx(np.mean(at2))
    assert stats["pass_at"][2]["stderr"] == pytest.approx(clustered_se(at2, docs), rel=1e-12)


def test_report_groups_are_json_ready():
    cells = [cell(f"c{i}", [i % 2, 1, 0], model=m) for m in ("a", "b") for i in range(4)]
    groups = report_groups(cells, threshold=0.5)
    assert [g["group"] for g in groups] == [{"model": "a"}, {"model": "b"}]
    text = json.dumps(groups, allow_nan=False)
    assert json.loads(text)[0]["pass_at"]["1"]["value"] == pytest.approx(groups[0]["mean"])


# --------------------------------------------------------------------------- compare


def test_compare_pairs_cases_and_matches_a_paired_t_test():
    base = [0.9, 0.8, 0.7, 0.95, 0.6, 0.85, 0.75, 0.9]
    run = [0.7, 0.6, 0.65, 0.8, 0.4, 0.7, 0.7, 0.75]
    baseline_cells = [cell(f"c{i}", [v]) for i, v in enumerate(base)]
    cells = [cell(f"c{i}", [v]) for i, v in reversed(list(enumerate(run)))]  # order is free
    (result,) = compare(baseline_cells, cells)
    ci = scipy.stats.ttest_rel(run, base).confidence_interval(0.95)
    diffs = np.subtract(run, base)
    assert result["group"] == {"model": "m"}
    assert result["delta"] == pytest.approx(diffs.mean(), abs=1e-12)
    assert (result["low"], result["high"]) == pytest.approx((ci.low, ci.high), rel=1e-10)
    assert result["stderr"] == pytest.approx(scipy.stats.sem(diffs), rel=1e-10)
    assert result["mean"] == pytest.approx(np.mean(base))
    assert result["run_mean"] == pytest.approx(np.mean(run))
    assert result["n_paired"] == 8 and result["interval"] == "t"
    z = scipy.stats.norm.ppf(0.975) + scipy.stats.norm.ppf(0.8)
    assert result["mde"] == pytest.approx(z * np.std(diffs, ddof=1) / math.sqrt(8), rel=1e-10)
    assert result["verdict"] == "regressed"
    # with a margin larger than the whole drop, the same difference is tolerated
    assert compare(baseline_cells, cells, margin=0.2)[0]["verdict"] == "no significant change"
    assert compare(cells, baseline_cells)[0]["verdict"] == "improved"


def test_compare_verdicts_margin_and_noise():
    base = [1, 0, 1, 1, 0, 1, 0, 1, 1, 0]
    noisy = [0, 1, 1, 1, 0, 0, 1, 1, 1, 0]  # as many up as down
    result = compare([cell(f"c{i}", [v]) for i, v in enumerate(base)],
                     [cell(f"c{i}", [v]) for i, v in enumerate(noisy)])[0]
    assert result["delta"] == 0.0 and result["verdict"] == "no significant change"
    assert result["low"] < 0 < result["high"]
    assert result["flipped"] == {"to_fail": ["c0", "c5"], "to_pass": ["c1", "c6"]}
    assert result["pass_bar"] == 0.5
    with pytest.raises(ValueError, match="margin"):
        compare([], [], margin=-0.1)


def test_compare_regression_must_clear_the_margin():
    base = [0.8] * 6
    run = [0.72, 0.7, 0.71, 0.69, 0.7, 0.68]
    args = ([cell(f"c{i}", [v]) for i, v in enumerate(base)],
            [cell(f"c{i}", [v]) for i, v in enumerate(run)])
    strict = compare(*args)[0]
    assert strict["high"] < -0.05 and strict["verdict"] == "regressed"
    assert compare(*args, margin=strict["high"] * -0.5)[0]["verdict"] == "regressed"
    assert compare(*args, margin=-strict["high"] * 2)[0]["verdict"] == "no significant change"


def test_compare_counts_unpaired_cases_and_baseline_only_groups():
    baseline_cells = [cell("c1", [1.0]), cell("c2", [0.0]), cell("c3", [1.0]),
                      cell("gone", [1.0]), cell("c1", [1.0], model="old")]
    cells = [cell("c1", [0.0]), cell("c2", [0.0]), cell("c3", [None], status="missing"),
             cell("new", [1.0]), cell("fresh", [0.0])]
    run_group, old_group = compare(baseline_cells, cells)
    assert run_group["n_paired"] == 2  # c1, c2: c3 is missing in this run
    assert run_group["only_in_baseline"] == 2  # c3 (missing here) and gone
    assert run_group["only_in_run"] == 2  # new, fresh
    assert run_group["flipped"] == {"to_fail": ["c1"], "to_pass": []}
    assert run_group["mean"] == pytest.approx(0.75) and run_group["run_mean"] == 0.25
    assert run_group["delta"] == -0.5
    assert old_group["group"] == {"model": "old"}
    assert (old_group["n_paired"], old_group["only_in_baseline"], old_group["delta"]) == (0, 1, None)
    assert old_group["verdict"] == "not compared" and old_group["run_mean"] is None


def test_compare_with_one_pair_has_no_interval_and_is_not_compared():
    (result,) = compare([cell("c1", [1.0])], [cell("c1", [0.0])])
    assert (result["delta"], result["low"], result["high"], result["mde"]) == (-1.0, None, None,
                                                                               None)
    assert result["verdict"] == "not compared"
    # a case in only one run pairs with nothing: still nothing measured
    (alone,) = compare([cell("c1", [1.0]), cell("c2", [1.0])], [cell("c1", [0.0])])
    assert alone["n_paired"] == 1 and alone["verdict"] == "not compared"


def test_compare_flips_use_the_threshold_and_sampled_cases():
    baseline_cells = [cell("c1", [1, 1, 1, 0]), cell("c2", [1, 0, 0, 0]), cell("c3", [1, 1, 0, 0])]
    cells = [cell("c1", [1, 1, 0, 0]), cell("c2", [1, 1, 1, 0]), cell("c3", [1, 1, 0, 0])]
    by_majority = compare(baseline_cells, cells)[0]
    assert by_majority["flipped"] == {"to_fail": [], "to_pass": ["c2"]}  # c1: 0.75 → 0.5 passes
    by_threshold = compare(baseline_cells, cells, threshold=0.75)[0]
    assert by_threshold["pass_bar"] == 0.75
    assert by_threshold["flipped"] == {"to_fail": ["c1"], "to_pass": ["c2"]}
    unbounded = compare([cell("c1", [3.0]), cell("c2", [1.0])], [cell("c1", [0.0]),
                        cell("c2", [1.0])])[0]
    assert unbounded["pass_bar"] is None and unbounded["flipped"] == {"to_fail": [], "to_pass": []}


def test_compare_with_clusters_uses_eq8():
    base = [1.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    run = [0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    docs = ["x", "x", "y", "y", "z", "z"]
    clusters = {key_of({"case": f"c{i}"}): d for i, d in enumerate(docs)}
    result = compare([cell(f"c{i}", [v]) for i, v in enumerate(base)],
                     [cell(f"c{i}", [v]) for i, v in enumerate(run)], clusters=clusters)[0]
    diffs = np.subtract(run, base)
    assert result["interval"] == "clustered-t"
    assert result["stderr"] == pytest.approx(clustered_se(diffs, docs), rel=1e-12)
    half = scipy.stats.t.ppf(0.975, 2) * result["stderr"]
    assert result["low"] == pytest.approx(max(-1.0, diffs.mean() - half))
    assert result["mde"] == pytest.approx(
        (scipy.stats.norm.ppf(0.975) + scipy.stats.norm.ppf(0.8)) * result["stderr"])


# --------------------------------------------------------------------------- invariants

sample_values = st.lists(st.one_of(st.none(), st.sampled_from([0.0, 1.0])), min_size=1,
                         max_size=6)
unit_values = st.lists(st.one_of(st.none(), st.floats(0, 1)), min_size=1, max_size=4)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(sample_values, unit_values), min_size=1, max_size=25),
       st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_unit_score_intervals_stay_in_range_and_contain_the_mean(per_case, confidence):
    cells = [cell(f"c{i}", vs) for i, vs in enumerate(per_case)]
    stats = group_statistics(group(cells), confidence=confidence)
    if stats["mean"] is None:
        assert stats["n"] == 0
        return
    assert 0.0 <= stats["mean"] <= 1.0
    if stats["low"] is not None:
        assert 0.0 <= stats["low"] <= stats["mean"] <= stats["high"] <= 1.0
    for k, entry in stats["pass_at"].items():
        assert 0.0 <= stats["pass_hat"][k]["value"] <= entry["value"] + 1e-15
        assert entry["value"] <= 1.0
    ks = sorted(stats["pass_at"])
    assert all(stats["pass_at"][a]["value"] <= stats["pass_at"][b]["value"] + 1e-12
               for a, b in itertools.pairwise(ks))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(sample_values, unit_values), min_size=1, max_size=25))
def test_a_run_compared_with_itself_has_not_changed(per_case):
    cells = [cell(f"c{i}", vs) for i, vs in enumerate(per_case)]
    (result,) = compare(cells, cells)
    expected = "no significant change" if result["n_paired"] >= 2 else "not compared"
    assert result["verdict"] == expected
    assert result["only_in_baseline"] == result["only_in_run"] == 0
    assert result["flipped"] == {"to_fail": [], "to_pass": []}
    if result["n_paired"]:
        assert result["delta"] == 0.0
    if result["n_paired"] > 1:
        assert result["low"] == result["high"] == 0.0


def test_precomputed_case_scores_give_the_same_reports():
    baseline_cells = [cell(f"c{i}", [i % 2, 1, (i // 2) % 2], model=m) for m in ("a", "b")
                      for i in range(6)]
    cells = [cell(f"c{i}", [1, i % 3 == 0, 0], model=m) for m in ("a", "b") for i in range(1, 7)]
    scores, base = case_scores(cells), case_scores(baseline_cells)
    assert report_groups(scores, threshold=0.5) == report_groups(cells, threshold=0.5)
    assert compare(base, scores) == compare(baseline_cells, cells)
    assert case_scores(iter(cells)) == scores  # any iterable of cells


def test_absurd_scores_are_refused_by_name():
    with pytest.raises(ValueError, match="'c1'.*finite numbers"):
        case_scores([cell("c1", [1e308, 1e308])])
    with pytest.raises(ValueError, match="'c2'.*inf"):
        case_scores([cell("c1", [1.0]), cell("c2", [None, math.inf])])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 1.0, 0.25, 0.5]), min_size=1, max_size=5),
                min_size=2, max_size=30),
       st.booleans())
def test_group_statistics_match_scipy_and_statsmodels(per_case, binary_only):
    if binary_only:
        per_case = [[1.0 if v >= 0.5 else 0.0 for v in vs] for vs in per_case]
    stats = group_statistics(group([cell(f"c{i}", vs) for i, vs in enumerate(per_case)]))
    means = [sum(vs) / len(vs) for vs in per_case]
    assert stats["mean"] == pytest.approx(np.mean(means), abs=1e-12)
    if all(m in (0.0, 1.0) for m in means):
        low, high = proportion_confint(int(sum(means)), len(means), method="wilson")
        assert stats["interval"] == "wilson"
    else:
        flat = len(set(means)) == 1  # scipy has no interval for a zero scale
        low, high = (means[0], means[0]) if flat else t_interval(means)
        low, high = max(0.0, low), min(1.0, high)
        assert stats["interval"] == "t"
    assert (stats["low"], stats["high"]) == pytest.approx((low, high), abs=1e-9)
