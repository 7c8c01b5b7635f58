"""fxtr.stats against independent references: scipy, statsmodels, exact fractions, the papers."""

import ast
import itertools
import math
import random
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
import statsmodels.api as sm
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.proportion import proportion_confint

from fxtr.stats import (
    Estimate,
    mean_ci,
    minimum_detectable_effect,
    paired_difference,
    pass_at_k,
    pass_hat_k,
    proportion_ci,
    required_sample_size,
    t_cdf,
    t_quantile,
)

STATS = Path(__file__).parents[1] / "src" / "fxtr" / "stats"

DFS = [*range(1, 41), 45, 60, 75, 100, 150, 250, 500, 1000, 5000, 10_000, 50_000, 99_999,
       100_000, 10**6, 10**7, 10**9, 0.5, 1.5, 2.5, 3.7, 12.25]
PS = [0.51, 0.6, 0.75, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995, 0.9995, 0.99995, 1 - 1e-8, 1 - 1e-12]


# --------------------------------------------------------------------------- Student t


@pytest.mark.parametrize("df", DFS)
def test_t_quantile_matches_scipy_to_1e10(df):
    for p in PS:
        for q in (p, 1 - p):
            ours, ref = t_quantile(q, df), scipy.stats.t.ppf(q, df)
            assert abs(ours - ref) <= 1e-10 * max(1.0, abs(ref)), (df, q, ours, ref)


def _exact_cdf(x, df):
    """The closed forms: Cauchy for df=1, ½ + x/(2√(2 + x²)) for df=2."""
    return 0.5 + math.atan(x) / math.pi if df == 1 else 0.5 + x / (2 * math.sqrt(2 + x * x))


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 30, 1000, 99_999, 10**6])
def test_t_quantile_inverts_the_cdf_near_the_median(df):
    """Close to p = ½ scipy's own ppf drifts (df=4, p=0.5000001 is off by 4e-4 relative) and
    so does its CDF at df=1 (1.4e-11 at x=1e-6): there the reference is scipy's CDF at our
    quantile, or the closed form for df 1 and 2."""
    for p in (0.5 + 1e-7, 0.5 + 1e-4, 0.501, 0.52):
        x = t_quantile(p, df)
        ref = _exact_cdf(x, df) if df <= 2 else scipy.stats.t.cdf(x, df)
        assert ref == pytest.approx(p, abs=2e-16)


def test_t_cdf_matches_closed_forms():
    for df in (1, 2):
        for x in (-1e3, -3.0, -1e-6, 0.0, 1e-9, 0.5, 2.0, 30.0):
            assert t_cdf(x, df) == pytest.approx(_exact_cdf(x, df), abs=2e-16)


def test_t_quantile_at_the_median_infinity_and_symmetry():
    assert t_quantile(0.5, 7) == 0.0
    assert t_quantile(0.975, math.inf) == pytest.approx(1.959963984540054, abs=1e-15)
    assert t_quantile(0.025, 9) == -t_quantile(0.975, 9)


@pytest.mark.parametrize("df", [3, 5, 10, 29.5, 100, 10_000, 99_999, 100_000, 10**6, 10**9])
def test_t_cdf_matches_scipy(df):
    for x in (-40.0, -5.0, -2.0, -1.0, -0.1, 0.0, 1e-6, 0.3, 1.0, 1.96, 3.0, 8.0, 100.0):
        assert t_cdf(x, df) == pytest.approx(scipy.stats.t.cdf(x, df), abs=1e-13)


def test_t_rejects_bad_arguments():
    for p in (0.0, 1.0, -0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            t_quantile(p, 5)
    for df in (0, -1, math.nan):
        with pytest.raises(ValueError, match="degrees of freedom"):
            t_quantile(0.9, df)
    with pytest.raises(ValueError, match="NaN"):
        t_cdf(math.nan, 3)


# --------------------------------------------------------------------------- mean_ci


@pytest.mark.parametrize("seed", range(8))
def test_mean_ci_matches_scipys_t_interval(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(rng.uniform(-5, 5), rng.uniform(0.1, 10), size=int(rng.integers(2, 300)))
    for confidence in (0.5, 0.8, 0.9, 0.95, 0.99):
        est = mean_ci(x.tolist(), confidence=confidence)
        low, high = scipy.stats.t.interval(confidence, len(x) - 1, loc=x.mean(),
                                           scale=scipy.stats.sem(x))
        assert est.value == pytest.approx(x.mean(), rel=1e-12, abs=1e-12)
        assert est.stderr == pytest.approx(scipy.stats.sem(x), rel=1e-12)
        assert (est.low, est.high) == pytest.approx((low, high), rel=1e-10, abs=1e-10)
        assert (est.n, est.df, est.method, est.clusters) == (len(x), len(x) - 1, "t", None)


def _inspect_clustered_stderr(values, clusters):
    """inspect_ai's stderr(cluster=...) (scorer/_metrics/std.py), rewritten with numpy."""
    values, clusters = np.asarray(values, float), np.asarray(clusters)
    mean = values.mean()
    unique = np.unique(clusters)
    total = sum(np.outer(values[clusters == c] - mean, values[clusters == c] - mean).sum()
                for c in unique)
    return np.sqrt(total * len(unique) / (len(unique) - 1)) / len(values)


def _miller_eq4_stderr(values, clusters):
    """Miller eq. 4 written as the paper does (CLT variance + within-cluster cross terms),
    times the finite-cluster correction C/(C-1)."""
    n = len(values)
    mean = sum(values) / n
    clt = sum((v - mean) ** 2 for v in values) / n**2
    cross = sum((values[i] - mean) * (values[j] - mean)
                for i in range(n) for j in range(n)
                if i != j and clusters[i] == clusters[j]) / n**2
    c = len(set(clusters))
    return math.sqrt((clt + cross) * c / (c - 1))


@pytest.mark.parametrize("seed", range(6))
def test_clustered_mean_matches_inspect_miller_and_statsmodels(seed):
    rng = np.random.default_rng(seed)
    c = int(rng.integers(2, 12))
    clusters = rng.integers(0, c, size=int(rng.integers(c, 80))).tolist()
    effects = rng.normal(0, 1, size=c)
    values = [float(effects[g] + rng.normal(0, 0.5)) for g in clusters]
    est = mean_ci(values, clusters=clusters)
    n_clusters = len(set(clusters))
    assert est.stderr == pytest.approx(_inspect_clustered_stderr(values, clusters), rel=1e-12)
    assert est.stderr == pytest.approx(_miller_eq4_stderr(values, clusters), rel=1e-10)
    # statsmodels' cluster-robust SE of an intercept-only OLS: its small-sample factor
    # G/(G-1)·(N-1)/(N-K) is G/(G-1) for K = 1 regressor; without it, the plain sandwich
    ols = sm.OLS(np.asarray(values), np.ones(len(values)))
    groups = np.asarray(clusters)
    fit = ols.fit(cov_type="cluster", cov_kwds={"groups": groups})
    raw = ols.fit(cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False})
    assert est.stderr == pytest.approx(fit.bse[0], rel=1e-10)
    assert est.stderr == pytest.approx(raw.bse[0] * math.sqrt(n_clusters / (n_clusters - 1)),
                                       rel=1e-10)
    half = scipy.stats.t.ppf(0.975, n_clusters - 1) * est.stderr
    assert (est.low, est.high) == pytest.approx((est.value - half, est.value + half), rel=1e-10)
    assert (est.clusters, est.df, est.method) == (n_clusters, n_clusters - 1, "clustered-t")


def test_clusters_of_one_value_each_give_the_plain_t_interval():
    values = [0.2, 0.9, 0.4, 0.7, 0.1, 1.0]
    plain = mean_ci(values)
    clustered = mean_ci(values, clusters=["a", "b", "c", "d", "e", "f"])
    assert clustered.stderr == pytest.approx(plain.stderr, rel=1e-12)
    assert (clustered.low, clustered.high) == pytest.approx((plain.low, plain.high), rel=1e-12)


def test_correlated_clusters_widen_the_interval():
    values = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    plain = mean_ci(values)
    clustered = mean_ci(values, clusters=list("aaabbbccdd"))
    assert clustered.stderr > plain.stderr
    assert clustered.high - clustered.low > plain.high - plain.low


def test_mean_ci_edge_cases():
    with pytest.raises(ValueError, match="at least one value"):
        mean_ci([])
    one = mean_ci([0.7])
    assert (one.value, one.stderr, one.low, one.high, one.n) == (0.7, None, None, None, 1)
    flat = mean_ci([0.1, 0.1, 0.1, 0.1])
    assert (flat.value, flat.stderr, flat.low, flat.high) == (0.1, 0.0, 0.1, 0.1)
    single = mean_ci([1.0, 0.0, 1.0], clusters=["x", "x", "x"])
    assert (single.value, single.stderr, single.low, single.high, single.clusters) == (
        pytest.approx(2 / 3), None, None, None, 1)
    with pytest.raises(ValueError, match="one cluster label per value"):
        mean_ci([1.0, 2.0], clusters=["a"])
    with pytest.raises(ValueError, match="finite number"):
        mean_ci([1.0, math.nan])
    with pytest.raises(ValueError, match="finite number"):
        mean_ci([1.0, math.inf])
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        mean_ci([1.0, 2.0], confidence=95)


def test_estimate_as_dict_is_json_ready():
    d = mean_ci([1.0, 2.0, 4.0]).as_dict()
    assert set(d) == {"value", "stderr", "low", "high", "n", "clusters", "df", "method",
                      "confidence"}
    assert Estimate(**d) == mean_ci([1.0, 2.0, 4.0])


# --------------------------------------------------------------------------- Wilson


def test_wilson_published_numbers():
    est = proportion_ci(17, 20)
    assert (round(est.low, 4), round(est.high, 4)) == (0.6396, 0.9476)
    est = proportion_ci(5, 5)
    assert (round(est.low, 4), est.high) == (0.5655, 1.0)
    assert proportion_ci(0, 5).low == 0.0


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 20, 37, 100, 1000])
def test_wilson_matches_statsmodels(n):
    for successes in sorted({0, 1, n // 3, n // 2, n - 1, n}):
        for confidence in (0.8, 0.9, 0.95, 0.99):
            est = proportion_ci(successes, n, confidence=confidence)
            low, high = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
            assert (est.low, est.high) == pytest.approx((low, high), abs=1e-12)
            p = successes / n
            assert est.value == p
            assert est.stderr == pytest.approx(math.sqrt(p * (1 - p) / n))
            assert est.method == "wilson"


def test_wilson_rejects_bad_counts():
    with pytest.raises(ValueError, match="n >= 1"):
        proportion_ci(0, 0)
    with pytest.raises(ValueError, match="must lie in 0..n"):
        proportion_ci(6, 5)
    with pytest.raises(ValueError, match="whole number"):
        proportion_ci(2.5, 5)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- paired


@pytest.mark.parametrize("seed", range(6))
def test_paired_difference_matches_scipys_paired_t_and_eq7(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 200))
    difficulty = rng.uniform(0, 1, n)
    a = np.clip(difficulty + rng.normal(0.05, 0.1, n), 0, 1)
    b = np.clip(difficulty + rng.normal(0, 0.1, n), 0, 1)
    est = paired_difference(a.tolist(), b.tolist())
    ref = scipy.stats.ttest_rel(a, b).confidence_interval(0.95)
    assert (est.low, est.high) == pytest.approx((ref.low, ref.high), rel=1e-10, abs=1e-12)
    assert est.value == pytest.approx(a.mean() - b.mean(), abs=1e-12)
    cov = np.cov(a, b, ddof=1)
    eq7 = math.sqrt((cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]) / n)
    assert est.stderr == pytest.approx(eq7, rel=1e-9)
    assert est.n == n and est.df == n - 1


def test_paired_difference_with_clusters_is_eq8():
    a = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    b = [0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0]
    labels = list("aabbccdd")
    est = paired_difference(a, b, clusters=labels)
    d = [x - y for x, y in zip(a, b, strict=True)]
    assert est.stderr == pytest.approx(_miller_eq4_stderr(d, labels), rel=1e-12)
    assert (est.clusters, est.df, est.method) == (4, 3, "clustered-t")


def test_paired_difference_rejects_unequal_lengths():
    with pytest.raises(ValueError, match="3 values in a and 2 in b"):
        paired_difference([1, 2, 3], [1, 2])


def test_paired_difference_edge_cases():
    with pytest.raises(ValueError, match="at least one value"):
        paired_difference([], [])
    one = paired_difference([0.2], [0.5])
    assert (one.value, one.stderr, one.low, one.high, one.n) == (pytest.approx(-0.3), None, None,
                                                                 None, 1)
    same = paired_difference([0.9, 0.4, 0.7], [0.8, 0.3, 0.6])  # every case up by 0.1
    assert same.value == pytest.approx(0.1) and same.stderr == pytest.approx(0.0, abs=1e-15)
    one_cluster = paired_difference([1.0, 0.0], [0.0, 0.0], clusters=["a", "a"])
    assert (one_cluster.stderr, one_cluster.clusters) == (None, 1)


# --------------------------------------------------------------------------- pass@k


def _exact_pass_at_k(n, c, k):
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def _chen_pass_at_k(n, c, k):
    """The numpy estimator printed in Chen et al. 2021, figure 3."""
    if n - c < k:
        return 1.0
    return 1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 20, 50, 200])
def test_pass_at_k_and_pass_hat_k_are_exact(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            exact = _exact_pass_at_k(n, c, k)
            assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12, abs=1e-300)
            assert pass_at_k(n, c, k) == pytest.approx(_chen_pass_at_k(n, c, k), abs=1e-12)
            hat = Fraction(math.comb(c, k), math.comb(n, k))
            assert pass_hat_k(n, c, k) == pytest.approx(float(hat), rel=1e-12, abs=1e-300)


def test_pass_at_k_keeps_relative_precision_when_tiny():
    exact = float(_exact_pass_at_k(10_000, 1, 1))
    assert pass_at_k(10_000, 1, 1) == pytest.approx(exact, rel=1e-15)
    exact = float(_exact_pass_at_k(100_000, 3, 2))
    assert pass_at_k(100_000, 3, 2) == pytest.approx(exact, rel=1e-13)


def test_pass_at_k_rejects_bad_counts():
    for n, c, k, match in ((0, 0, 1, "n >= 1"), (5, 6, 1, "0..n"), (5, -1, 1, "0..n"),
                           (5, 2, 0, "1..n"), (5, 2, 6, "1..n")):
        with pytest.raises(ValueError, match=match):
            pass_at_k(n, c, k)
        with pytest.raises(ValueError, match=match):
            pass_hat_k(n, c, k)


# --------------------------------------------------------------------------- power


def test_required_sample_size_papers_example():
    """Miller §5: ω² = 1/9, δ = 0.03 at alpha = 0.05 and 80% power → 969 questions."""
    assert required_sample_size(0.03, math.sqrt(1 / 9)) == 969
    assert required_sample_size(-0.03, math.sqrt(1 / 9)) == 969
    z = scipy.stats.norm.ppf(0.975) + scipy.stats.norm.ppf(0.8)
    for delta, sd in ((0.01, 0.3), (0.05, 0.5), (0.1, 0.2), (0.2, 1.0)):
        assert required_sample_size(delta, sd) == math.ceil((z * sd / delta) ** 2)


def test_minimum_detectable_effect_inverts_the_sample_size():
    z = scipy.stats.norm.ppf(1 - 0.01 / 2) + scipy.stats.norm.ppf(0.9)
    assert minimum_detectable_effect(400, 0.5, alpha=0.01, power=0.9) == pytest.approx(
        z * 0.5 / 20, rel=1e-14)
    for delta, sd in ((0.03, 1 / 3), (0.05, 0.4), (0.12, 0.9)):
        n = required_sample_size(delta, sd)
        assert minimum_detectable_effect(n, sd) <= delta < minimum_detectable_effect(n - 1, sd)
    assert minimum_detectable_effect(10, 0.0) == 0.0
    assert required_sample_size(0.1, 0.0) == 1


def test_the_k_resampling_factor():
    """Miller §3.1: with success probabilities p ~ U(0, 1), the mean of K Bernoulli(p) draws
    per question has variance (1/12)(1 + 2/K), i.e. (1 + 2/K)/3 of the K = 1 variance 1/4, so
    the sample size needed shrinks by that factor. Under p ~ U(0, 1) the number of passes k of
    K is uniform on 0..K (beta-binomial with a = b = 1), which gives the population exactly."""
    def population_sd(k_samples):
        means = [k / k_samples for k in range(k_samples + 1)] * 7
        est = mean_ci(means)
        n = len(means)
        return est.stderr * math.sqrt(n) * math.sqrt((n - 1) / n)

    base = population_sd(1)
    assert base**2 == pytest.approx(1 / 4, rel=1e-12)
    for k_samples in (2, 3, 5, 10, 50):
        factor = (1 + 2 / k_samples) / 3
        assert population_sd(k_samples) ** 2 / base**2 == pytest.approx(factor, rel=1e-12)
        ratio = required_sample_size(0.001, population_sd(k_samples)) / required_sample_size(
            0.001, base)
        assert ratio == pytest.approx(factor, rel=1e-5)
    # and by simulation, seeded
    rng = random.Random(16)
    for k_samples in (1, 4):
        means = []
        for _ in range(40_000):
            p = rng.random()
            means.append(sum(rng.random() < p for _ in range(k_samples)) / k_samples)
        sd = mean_ci(means).stderr * math.sqrt(len(means))
        assert sd**2 == pytest.approx((1 + 2 / k_samples) / 12, rel=0.03)


def test_power_rejects_bad_arguments():
    with pytest.raises(ValueError, match="non-zero delta"):
        required_sample_size(0.0, 0.3)
    with pytest.raises(ValueError, match="sd must be"):
        required_sample_size(0.1, -1.0)
    with pytest.raises(ValueError, match="alpha"):
        minimum_detectable_effect(10, 0.3, alpha=0.0)
    with pytest.raises(ValueError, match="power"):
        minimum_detectable_effect(10, 0.3, power=1.0)
    with pytest.raises(ValueError, match="n >= 1"):
        minimum_detectable_effect(0, 0.3)


# --------------------------------------------------------------------------- invariants

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
confidences = st.floats(min_value=0.01, max_value=0.999)


@settings(deadline=None)
@given(st.lists(finite, min_size=2, max_size=40), confidences, confidences)
def test_t_intervals_contain_the_mean_and_grow_with_confidence(values, c1, c2):
    lo_c, hi_c = sorted((c1, c2))
    narrow, wide = mean_ci(values, confidence=lo_c), mean_ci(values, confidence=hi_c)
    assert narrow.low <= narrow.value <= narrow.high
    assert min(values) <= narrow.value <= max(values)
    assert wide.low <= narrow.low and narrow.high <= wide.high
    assert narrow.stderr >= 0


@settings(deadline=None)
@given(st.lists(finite, min_size=2, max_size=30), st.data())
def test_clustered_intervals_contain_the_mean(values, data):
    labels = data.draw(st.lists(st.integers(0, 4), min_size=len(values), max_size=len(values)))
    est = mean_ci(values, clusters=labels)
    if len(set(labels)) == 1:
        assert est.stderr is None and est.low is None
    else:
        assert est.low <= est.value <= est.high
        assert est.clusters == len(set(labels))


@settings(deadline=None)
@given(st.integers(1, 500), st.data(), confidences, confidences)
def test_wilson_stays_in_range_contains_p_and_grows_with_confidence(n, data, c1, c2):
    successes = data.draw(st.integers(0, n))
    lo_c, hi_c = sorted((c1, c2))
    narrow = proportion_ci(successes, n, confidence=lo_c)
    wide = proportion_ci(successes, n, confidence=hi_c)
    assert 0.0 <= wide.low <= narrow.low <= narrow.value <= narrow.high <= wide.high <= 1.0
    assert narrow.high > narrow.low
    mirror = proportion_ci(n - successes, n, confidence=lo_c)
    assert mirror.low == pytest.approx(1 - narrow.high, abs=1e-12)


@settings(deadline=None)
@given(st.integers(1, 60), st.data())
def test_pass_at_k_invariants(n, data):
    c = data.draw(st.integers(0, n))
    at = [pass_at_k(n, c, k) for k in range(1, n + 1)]
    hat = [pass_hat_k(n, c, k) for k in range(1, n + 1)]
    assert all(0.0 <= v <= 1.0 for v in at + hat)
    assert all(x <= y + 1e-15 for x, y in itertools.pairwise(at))
    assert all(x + 1e-15 >= y for x, y in itertools.pairwise(hat))
    assert all(h <= a + 1e-15 for h, a in zip(hat, at, strict=True))
    assert at[0] == pytest.approx(c / n) and hat[0] == pytest.approx(c / n)


@settings(deadline=None)
@given(st.lists(unit, min_size=1, max_size=40))
def test_a_run_paired_with_itself_differs_by_nothing(values):
    est = paired_difference(values, values)
    assert est.value == 0.0
    if len(values) > 1:
        assert (est.stderr, est.low, est.high) == (0.0, 0.0, 0.0)


@settings(deadline=None)
@given(st.lists(st.tuples(unit, unit), min_size=2, max_size=40))
def test_paired_difference_is_antisymmetric(pairs):
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    ab, ba = paired_difference(a, b), paired_difference(b, a)
    assert ab.value == pytest.approx(-ba.value, abs=1e-12)
    assert ab.low == pytest.approx(-ba.high, abs=1e-12)
    assert ab.low <= ab.value <= ab.high


@settings(max_examples=60, deadline=None)
@given(st.floats(0.5001, 0.9999), st.floats(0.5001, 0.9999), st.integers(1, 200),
       st.integers(1, 200))
def test_t_quantile_is_monotone(p1, p2, df1, df2):
    (pa, pb), (da, db) = sorted((p1, p2)), sorted((df1, df2))
    assert t_quantile(pa, da) <= t_quantile(pb, da)
    assert t_quantile(pa, db) <= t_quantile(pa, da)


# --------------------------------------------------------------------------- standalone


def test_stats_imports_only_the_standard_library():
    roots = set()
    for path in STATS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:  # relative: the package
                roots.add((node.module or "").split(".")[0])
    assert roots <= set(sys.stdlib_module_names), roots - set(sys.stdlib_module_names)


def test_stats_loads_on_its_own_without_fxtr_or_scipy():
    """The package loads under another name, with nothing of fxtr (nor scipy) imported."""
    code = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location(\n"
        f"    'fxtr_stats_alone', {str(STATS / '__init__.py')!r},\n"
        f"    submodule_search_locations=[{str(STATS)!r}])\n"
        "m = importlib.util.module_from_spec(spec); sys.modules[spec.name] = m\n"
        "spec.loader.exec_module(m)\n"
        "e = m.mean_ci([1.0, 0.0, 1.0, 1.0])\n"
        "assert round(e.high, 6) == round(0.75 + 3.182446305284263 * 0.25, 6), e\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('fxtr', 'scipy', 'numpy'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
