# ruff: noqa: RUF002  (the formulas are written in mathematical notation)
"""Statistics for eval scores: intervals, paired differences, pass@k and power (DESIGN §8).

Pure functions on plain numbers, no I/O, and nothing outside the standard library: this
module imports no other part of fxtr (so it can be copied or loaded on its own) and never
needs scipy. Every interval is two-sided at ``confidence`` (0.95 unless told).

The references:

- Miller, "Adding Error Bars to Evals: A Statistical Approach to Language Model Evaluations"
  (arXiv 2411.00640): the clustered standard error (eq. 4), the paired difference (eq. 7, 8)
  and the power analysis (eq. 9, 10).
- Wilson, "Probable inference, the law of succession, and statistical inference" (JASA,
  1927): the score interval of a proportion.
- Chen et al., "Evaluating Large Language Models Trained on Code" (arXiv 2107.03374): the
  unbiased estimator of pass@k.
- Lee et al., "How to Correctly Report LLM-as-a-Judge Evaluations" (arXiv 2511.21140): a
  judge's pass rate corrected for its specificity and sensitivity (``_judges``), and Cohen
  (1960) for kappa.

Edge cases, the same everywhere: no value at all is a ``ValueError`` (there is nothing to
estimate); a single value (or a single cluster) gives its value with ``stderr``, ``low`` and
``high`` of ``None`` (a spread cannot be estimated from one observation, and an infinite
interval is no help to anyone reading a report); values that are all equal give a standard
error of 0 and an interval of zero width (the t interval's own answer; use
:func:`proportion_ci` for 0/1 outcomes, whose interval is never empty).

The Student t quantile (:func:`t_quantile`) is computed here too, in ``_student_t``: the
regularized incomplete beta function by its continued fraction, and Newton's method, checked
against scipy to 1e-10.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Iterable, Sequence
from statistics import NormalDist

from ._estimate import Estimate
from ._judges import cohen_kappa, corrected_proportion
from ._student_t import t_cdf, t_quantile  # relative: the package loads without fxtr

__all__ = [
    "Estimate",
    "cohen_kappa",
    "corrected_proportion",
    "mean_ci",
    "minimum_detectable_effect",
    "paired_difference",
    "pass_at_k",
    "pass_hat_k",
    "proportion_ci",
    "required_sample_size",
    "t_cdf",
    "t_quantile",
]

_NORMAL = NormalDist()


# --------------------------------------------------------------------------- intervals


def mean_ci(
    values: Iterable[float],
    *,
    clusters: Iterable[Hashable] | None = None,
    confidence: float = 0.95,
) -> Estimate:
    """The mean of ``values`` with a Student t interval.

    Without clusters, for n values with mean ``x̄`` and sample variance
    ``s² = Σ(xᵢ − x̄)² / (n − 1)``::

        SE = s / √n,    interval = x̄ ± t(1 − α/2; n − 1) · SE,    α = 1 − confidence.

    With ``clusters`` (one hashable label per value; values sharing a label are correlated,
    e.g. questions about one document), the clustered standard error of Miller eq. 4 with the
    finite-cluster correction C/(C − 1), exactly as inspect_ai's ``stderr(cluster=...)``::

        SE² = C/(C − 1) · (1/n²) · Σ_c (Σ_{i∈c} (xᵢ − x̄))²,    interval on C − 1 df.

    (Eq. 4 writes the same sum as the CLT variance plus the within-cluster cross terms
    ``Σ_c Σ_i Σ_{j≠i} (x_ic − x̄)(x_jc − x̄) / n²``.) When every cluster holds one value,
    ``SE² = Σ(xᵢ − x̄)² / (n(n − 1))``: the unclustered standard error, on n − 1 df.

    Args:
        values: the observations (at least one).
        clusters: one cluster label per value, or ``None``.
        confidence: the interval's confidence level, in (0, 1).

    Returns:
        An :class:`Estimate`; with one value (or one cluster) its ``stderr``, ``low`` and
        ``high`` are ``None``.

    Raises:
        ValueError: no values, labels that do not match the values one to one, a value that
            is not a finite number, or a confidence outside (0, 1).
    """
    _check_confidence(confidence)
    return _mean_ci(_finite_floats(values, "mean_ci"), clusters, confidence)


def _mean_ci(xs: list[float], clusters: Iterable[Hashable] | None, confidence: float) -> Estimate:
    """:func:`mean_ci` of values already checked."""
    n = len(xs)
    mean = _mean(xs)
    if clusters is None:
        if n == 1:
            return Estimate(mean, None, None, None, 1, confidence=confidence)
        se = math.sqrt(_sum_of_squares(xs, mean) / (n - 1) / n)
        return _t_estimate(mean, se, n, n - 1, None, "t", confidence)
    labels = list(clusters)
    if len(labels) != n:
        msg = (
            f"mean_ci got {n} values but {len(labels)} cluster labels; "
            "give exactly one cluster label per value"
        )
        raise ValueError(msg)
    residuals: dict[Hashable, list[float]] = {}
    for x, label in zip(xs, labels, strict=True):
        residuals.setdefault(label, []).append(x - mean)
    c = len(residuals)
    if c == 1:
        return Estimate(mean, None, None, None, n, 1, None, "clustered-t", confidence)
    if _all_equal(xs):
        se = 0.0
    else:
        between = math.fsum(math.fsum(r) ** 2 for r in residuals.values())
        se = math.sqrt(between * c / (c - 1)) / n
    return _t_estimate(mean, se, n, c - 1, c, "clustered-t", confidence)


def proportion_ci(successes: int, n: int, *, confidence: float = 0.95) -> Estimate:
    """The proportion ``successes / n`` with the Wilson score interval.

    With ``p̂ = successes/n`` and ``z = Φ⁻¹(1 − α/2)``::

        center = (p̂ + z²/(2n)) / (1 + z²/n)
        half   = z / (1 + z²/n) · √(p̂(1 − p̂)/n + z²/(4n²))
        interval = center ± half      (inside [0, 1]; exactly 0 at p̂ = 0 and 1 at p̂ = 1)

    Unlike the normal (Wald) interval it never leaves [0, 1], never has zero width, and keeps
    its coverage for small n and proportions near 0 or 1 (17/20 → 0.6396–0.9476, 5/5 →
    0.5655–1.0). ``stderr`` is the binomial standard error ``√(p̂(1 − p̂)/n)``.

    Args:
        successes: the number of successes, 0 ≤ successes ≤ n.
        n: the number of trials, at least 1.
        confidence: the interval's confidence level, in (0, 1).

    Raises:
        ValueError: counts that are not integers, n < 1, successes outside 0..n, or a
            confidence outside (0, 1).
    """
    _check_confidence(confidence)
    successes = _count(successes, "successes")
    n = _count(n, "n")
    if n < 1:
        msg = "proportion_ci needs n >= 1 trials; with no trial there is no proportion"
        raise ValueError(msg)
    if not 0 <= successes <= n:
        msg = f"proportion_ci got successes={successes} out of n={n}; it must lie in 0..n"
        raise ValueError(msg)
    p = successes / n
    z = _z(confidence)
    z2n = z * z / n
    center = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / n + z2n / (4 * n))
    low = 0.0 if successes == 0 else max(0.0, min(p, center - half))
    high = 1.0 if successes == n else min(1.0, max(p, center + half))
    se = math.sqrt(p * (1 - p) / n)
    return Estimate(p, se, low, high, n, method="wilson", confidence=confidence)


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    clusters: Iterable[Hashable] | None = None,
    confidence: float = 0.95,
) -> Estimate:
    """The mean paired difference ``a[i] − b[i]`` with a t interval.

    Miller eq. 7: with ``dᵢ = aᵢ − bᵢ``::

        SE = √((Var(a) + Var(b) − 2 Cov(a, b)) / n) = sd(d) / √n,   interval on n − 1 df,

    (the two forms are one identity; the second is what is computed). With ``clusters``,
    eq. 8: the clustered standard error of :func:`mean_ci` applied to the differences, with
    the C/(C − 1) correction and C − 1 df. Pairing removes the variance the two runs share
    (the difficulty of each case), so it detects far smaller changes than comparing two
    unpaired means.

    Args:
        a: the scores of the run being judged, one per case.
        b: the scores of the reference run for the same cases, in the same order.
        clusters: one cluster label per pair, or ``None``.
        confidence: the interval's confidence level, in (0, 1).

    Returns:
        An :class:`Estimate` of ``mean(a) − mean(b)``; ``a`` compared with itself gives 0 with
        a standard error of 0 (for n ≥ 2).

    Raises:
        ValueError: sequences of different lengths, or as :func:`mean_ci`.
    """
    xs = _finite_floats(a, "paired_difference (a)")
    ys = _finite_floats(b, "paired_difference (b)")
    if len(xs) != len(ys):
        msg = (
            f"paired_difference got {len(xs)} values in a and {len(ys)} in b; "
            "pairs need one value of each per case, in the same order"
        )
        raise ValueError(msg)
    _check_confidence(confidence)
    return _mean_ci(list(map(operator.sub, xs, ys)), clusters, confidence)


# --------------------------------------------------------------------------- pass@k


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``c`` passes in ``n`` samples (Chen et al. 2021).

    The probability that at least one of k samples drawn without replacement from the n
    passes::

        pass@k = 1 − C(n − c, k) / C(n, k) = 1 − Π_{i=n−c+1}^{n} (1 − k/i)

    computed as ``−expm1(Σ log1p(−k/i))`` (or the equal product over the k draws,
    ``Π_{i=0}^{k−1} (1 − c/(n − i))``, whichever has fewer terms), which keeps full relative
    precision when pass@k is tiny and never forms a binomial coefficient. It is 1 when
    ``n − c < k`` (every draw of k contains a pass), and exactly ``c/n`` for k = 1.

    Raises:
        ValueError: n < 1, c outside 0..n, or k outside 1..n.
    """
    n, c, k = _check_pass_args(n, c, k, "pass_at_k")
    if n - c < k:
        return 1.0
    if k == 1:
        return c / n  # pass@1 is the pass rate, exactly
    if c <= k:
        log_miss = math.fsum(math.log1p(-k / i) for i in range(n - c + 1, n + 1))
    else:
        log_miss = math.fsum(math.log1p(-c / (n - i)) for i in range(k))
    return -math.expm1(log_miss)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The estimate of pass^k, the probability that k samples all pass: ``C(c, k) / C(n, k)``.

    Computed as the product ``Π_{i=0}^{k−1} (c − i)/(n − i)`` (k draws without replacement
    from n samples of which c pass, all of them passes); 0 when c < k. pass^1 = pass@1 =
    c/n, and pass^k ≤ pass@k for every k.

    Raises:
        ValueError: n < 1, c outside 0..n, or k outside 1..n.
    """
    n, c, k = _check_pass_args(n, c, k, "pass_hat_k")
    if c < k:
        return 0.0
    return math.prod((c - i) / (n - i) for i in range(k))


# --------------------------------------------------------------------------- power


def minimum_detectable_effect(
    n: int, sd: float, *, alpha: float = 0.05, power: float = 0.8
) -> float:
    """The smallest true difference a paired comparison of n cases detects with ``power``.

    Miller eq. 10 (the power formula of eq. 9 solved for δ), with the normal quantiles
    ``z_{1−α/2}`` and ``z_power`` of a two-sided test at level α::

        MDE = (z_{1−α/2} + z_power) · sd / √n

    Args:
        n: the number of paired cases, at least 1.
        sd: the standard deviation of the per-case differences (with K samples per case, the
            paper's ``√(ω² + (σ²_A + σ²_B)/K)``).
        alpha: the test's significance level, in (0, 1).
        power: the probability of detecting a true difference of that size, in (0, 1).

    Raises:
        ValueError: n < 1, a negative or non-finite sd, alpha or power outside (0, 1).
    """
    n = _count(n, "n")
    if n < 1:
        msg = "minimum_detectable_effect needs n >= 1 paired cases"
        raise ValueError(msg)
    return _power_z(alpha, power) * _check_sd(sd) / math.sqrt(n)


def required_sample_size(
    delta: float, sd: float, *, alpha: float = 0.05, power: float = 0.8
) -> int:
    """How many paired cases detect a true difference ``delta`` with ``power``.

    Miller eq. 9, with the notation of :func:`minimum_detectable_effect`::

        n = ⌈(z_{1−α/2} + z_power)² · sd² / δ²⌉    (at least 1)

    With sd² = 1/9 and δ = 0.03 (the paper's example): n = 969. Resampling each case K times
    shrinks sd² = ω² + σ²/K and with it n; for Bernoulli outcomes whose success
    probabilities are uniform on [0, 1] the factor is (1 + 2/K)/3 of the K = 1 value. The
    formula uses the normal approximation, as the paper does: below ~30 cases a t-based
    calculation asks for a few more.

    Args:
        delta: the difference to detect, > 0 (its sign does not matter to a two-sided test;
            a negative delta is taken by its size).
        sd: the standard deviation of the per-case differences, ≥ 0.
        alpha: the test's significance level, in (0, 1).
        power: the probability of detecting ``delta``, in (0, 1).

    Raises:
        ValueError: delta of 0 or not finite, a negative or non-finite sd, alpha or power
            outside (0, 1).
    """
    if not math.isfinite(delta) or delta == 0:
        msg = f"required_sample_size needs a finite, non-zero delta to detect, not {delta!r}"
        raise ValueError(msg)
    n = (_power_z(alpha, power) * _check_sd(sd) / abs(delta)) ** 2
    # a relative 1e-12 slack keeps an exact integer answer from rounding up by one ulp
    return max(1, math.ceil(n * (1 - 1e-12)))


# --------------------------------------------------------------------------- helpers


def _t_estimate(
    mean: float, se: float, n: int, df: int, clusters: int | None, method: str,
    confidence: float,
) -> Estimate:
    half = t_quantile(0.5 + confidence / 2, df) * se
    return Estimate(mean, se, mean - half, mean + half, n, clusters, df, method, confidence)


def _finite_floats(values: Iterable[float], where: str) -> list[float]:
    xs = list(map(float, values))
    if not xs:
        msg = f"{where} needs at least one value; with none there is nothing to estimate"
        raise ValueError(msg)
    if not math.isfinite(math.fsum(xs)):
        bad = next(v for v in xs if not math.isfinite(v))
        msg = f"{where} got {bad!r}; every value must be a finite number"
        raise ValueError(msg)
    return xs


def _mean(xs: list[float]) -> float:
    lo, hi = min(xs), max(xs)
    if lo == hi:
        return lo
    return min(hi, max(lo, math.fsum(xs) / len(xs)))


def _all_equal(xs: list[float]) -> bool:
    return min(xs) == max(xs)


def _sum_of_squares(xs: list[float], mean: float) -> float:
    if _all_equal(xs):
        return 0.0
    residuals = [x - mean for x in xs]
    return math.fsum(map(operator.mul, residuals, residuals))


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        msg = f"confidence must lie strictly between 0 and 1 (e.g. 0.95), not {confidence!r}"
        raise ValueError(msg)


def _z(confidence: float) -> float:
    return _NORMAL.inv_cdf(0.5 + confidence / 2)


def _power_z(alpha: float, power: float) -> float:
    if not 0.0 < alpha < 1.0:
        msg = f"alpha must lie strictly between 0 and 1 (e.g. 0.05), not {alpha!r}"
        raise ValueError(msg)
    if not 0.0 < power < 1.0:
        msg = f"power must lie strictly between 0 and 1 (e.g. 0.8), not {power!r}"
        raise ValueError(msg)
    return _NORMAL.inv_cdf(1 - alpha / 2) + _NORMAL.inv_cdf(power)


def _check_sd(sd: float) -> float:
    if not (math.isfinite(sd) and sd >= 0):
        msg = f"sd must be a finite standard deviation >= 0, not {sd!r}"
        raise ValueError(msg)
    return float(sd)


def _count(value: object, name: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    msg = f"{name} must be a whole number, not {value!r}"
    raise ValueError(msg)


def _check_pass_args(n: int, c: int, k: int, where: str) -> tuple[int, int, int]:
    n, c, k = _count(n, "n"), _count(c, "c"), _count(k, "k")
    if n < 1:
        msg = f"{where} needs n >= 1 samples, not {n}"
        raise ValueError(msg)
    if not 0 <= c <= n:
        msg = f"{where} got c={c} passes out of n={n} samples; c must lie in 0..n"
        raise ValueError(msg)
    if not 1 <= k <= n:
        msg = f"{where} got k={k} with n={n} samples; k must lie in 1..n"
        raise ValueError(msg)
    return n, c, k
