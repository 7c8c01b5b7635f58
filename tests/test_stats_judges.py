"""fxtr.stats' judge statistics against the paper, scikit-learn, statsmodels and a simulation."""

import math
import random

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.proportion import proportion_confint

from fxtr.stats import Estimate, cohen_kappa, corrected_proportion, proportion_ci

# --------------------------------------------------------------------------- Rogan-Gladen


def test_the_published_worked_example():
    """Lee et al. (arXiv 2511.21140): p=0.70, n=1000, q0=0.85, q1=0.90, m0=m1=100."""
    est = corrected_proportion(0.70, 1000, q0=0.85, m0=100, q1=0.90, m1=100)
    assert isinstance(est, Estimate)
    assert round(est.value, 4) == 0.7333
    assert round(est.stderr, 4) == 0.0373
    assert est.n == 1000 and est.method == "rogan-gladen"
    z = 1.959963984540054
    assert est.low == pytest.approx(est.value - z * est.stderr, abs=1e-12)
    assert est.high == pytest.approx(est.value + z * est.stderr, abs=1e-12)


def test_the_formula_term_by_term():
    """θ and the delta-method variance computed by hand from DESIGN §15, another point."""
    p, n, q0, m0, q1, m1 = 0.42, 250, 0.7, 40, 0.8, 60
    theta = (p + q0 - 1) / (q0 + q1 - 1)
    var = (p * (1 - p) / n + (1 - theta) ** 2 * q0 * (1 - q0) / m0
           + theta**2 * q1 * (1 - q1) / m1) / (q0 + q1 - 1) ** 2
    est = corrected_proportion(p, n, q0=q0, m0=m0, q1=q1, m1=m1, confidence=0.9)
    assert est.value == pytest.approx(theta, rel=1e-12)
    assert est.stderr == pytest.approx(math.sqrt(var), rel=1e-12)
    assert est.high - est.value == pytest.approx(1.6448536269514722 * math.sqrt(var), rel=1e-9)
    assert est.confidence == 0.9


def test_a_perfect_judge_changes_nothing_and_the_value_is_clipped():
    est = corrected_proportion(0.6, 100, q0=1.0, m0=50, q1=1.0, m1=50)
    assert est.value == pytest.approx(0.6)
    assert est.stderr == pytest.approx(math.sqrt(0.6 * 0.4 / 100))
    # p below the false-positive rate 1 - q0: θ < 0 before clipping
    low = corrected_proportion(0.05, 100, q0=0.8, m0=50, q1=0.9, m1=50)
    assert low.value == 0.0 and low.low == 0.0 and low.high > 0
    high = corrected_proportion(0.99, 100, q0=0.9, m0=50, q1=0.8, m1=50)
    assert high.value == 1.0 and high.high == 1.0 and high.low < 1


@pytest.mark.parametrize(("q0", "q1"), [(0.5, 0.5), (0.3, 0.6), (0.2, 0.1), (0.0, 1.0)])
def test_a_judge_no_better_than_chance_is_refused(q0, q1):
    with pytest.raises(ValueError, match="no better than chance"):
        corrected_proportion(0.5, 100, q0=q0, m0=10, q1=q1, m1=10)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"p": 1.2}, {"p": -0.1}, {"q0": 1.5}, {"q1": float("nan")}, {"n": 0}, {"m0": 0},
        {"m1": 2.5}, {"n": True}, {"confidence": 1.0},
    ],
)
def test_bad_arguments_are_refused(kwargs):
    args = {"p": 0.5, "n": 10, "q0": 0.9, "m0": 10, "q1": 0.9, "m1": 10, **kwargs}
    p, n = args.pop("p"), args.pop("n")
    with pytest.raises(ValueError):
        corrected_proportion(p, n, **args)


def _simulated_coverage(theta, q0, q1, n, m0, m1, runs, rng):
    covered = 0
    for _ in range(runs):
        # the test items: each truly passes with probability θ, the judge errs
        truth = rng.random(n) < theta
        judged = np.where(truth, rng.random(n) < q1, rng.random(n) >= q0)
        p = judged.mean()
        # the gold set: m0 negatives, m1 positives, graded by the same judge
        q0_hat = (rng.random(m0) < q0).mean()
        q1_hat = (rng.random(m1) < q1).mean()
        if q0_hat + q1_hat <= 1:
            continue  # a refused estimate covers nothing; counted as a miss below
        est = corrected_proportion(p, n, q0=q0_hat, m0=m0, q1=q1_hat, m1=m1)
        covered += est.low <= theta <= est.high
    return covered / runs


@pytest.mark.parametrize(
    ("theta", "q0", "q1"),
    [(0.7, 0.85, 0.9), (0.5, 0.95, 0.95), (0.3, 0.8, 0.75), (0.6, 0.9, 0.7)],
)
def test_the_interval_covers_95_percent_across_judge_qualities(theta, q0, q1):
    """A seeded simulation: the 95% interval covers the true rate 95% ± 2% of the time."""
    rng = np.random.default_rng(20261201 + int(theta * 100) + int(q0 * 1000))
    coverage = _simulated_coverage(theta, q0, q1, n=400, m0=200, m1=200, runs=2000, rng=rng)
    assert 0.93 <= coverage <= 0.97, coverage


def test_the_naive_judge_rate_does_not_cover():
    """The point of the correction: the raw rate's own interval misses θ most of the time."""
    rng = np.random.default_rng(7)
    theta, q0, q1, n = 0.7, 0.7, 0.8, 1000  # the judge reports 0.65 on average
    missed = 0
    for _ in range(300):
        truth = rng.random(n) < theta
        judged = np.where(truth, rng.random(n) < q1, rng.random(n) >= q0)
        raw = proportion_ci(int(judged.sum()), n)
        missed += not raw.low <= theta <= raw.high
    assert missed / 300 > 0.5


# --------------------------------------------------------------------------- Wilson


@pytest.mark.parametrize(("k", "m"), [(0, 10), (3, 10), (17, 20), (20, 20), (41, 57), (1, 1)])
def test_the_judges_wilson_intervals_match_statsmodels(k, m):
    """q0 and q1 are reported with Wilson intervals; statsmodels' is the reference."""
    est = proportion_ci(k, m)
    low, high = proportion_confint(k, m, alpha=0.05, method="wilson")
    assert est.low == pytest.approx(low, abs=1e-12)
    assert est.high == pytest.approx(high, abs=1e-12)


# --------------------------------------------------------------------------- kappa


@pytest.mark.parametrize("seed", range(12))
def test_kappa_matches_scikit_learn(seed):
    rng = random.Random(seed)
    labels = ["C", "I", "P"][: rng.choice([2, 3])]
    n = rng.randint(2, 200)
    a = [rng.choice(labels) for _ in range(n)]
    agree = rng.random()
    b = [x if rng.random() < agree else rng.choice(labels) for x in a]
    if len(set(a)) == len(set(b)) == 1 and a[0] == b[0]:
        b[0] = next(x for x in labels if x != a[0])
    est = cohen_kappa(a, b)
    assert est.value == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert est.method == "cohen" and est.n == n


def test_kappa_extremes_and_its_standard_error():
    assert cohen_kappa([1, 0, 1, 0], [1, 0, 1, 0]).value == 1.0
    assert cohen_kappa([1, 0, 1, 0], [0, 1, 0, 1]).value == -1.0
    a, b = [1, 1, 0, 0, 1, 0, 1, 1], [1, 0, 0, 0, 1, 1, 1, 1]
    po = 6 / 8
    pe = (5 / 8) * (5 / 8) + (3 / 8) * (3 / 8)
    est = cohen_kappa(a, b)
    assert est.value == pytest.approx((po - pe) / (1 - pe))
    assert est.stderr == pytest.approx(math.sqrt(po * (1 - po) / 8) / (1 - pe))
    assert -1 <= est.low <= est.value <= est.high <= 1


def test_kappa_refuses_what_it_cannot_rate():
    with pytest.raises(ValueError, match="same items"):
        cohen_kappa([1, 0], [1])
    with pytest.raises(ValueError, match="at least one"):
        cohen_kappa([], [])
    with pytest.raises(ValueError, match="undefined"):
        cohen_kappa([1, 1, 1], [1, 1, 1])
