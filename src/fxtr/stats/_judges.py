# ruff: noqa: RUF002  (the formulas are written in mathematical notation)
"""Statistics of judges: a pass rate corrected for the judge's errors, and rater agreement.

Standard library only, like the package (DESIGN §15). The references:

- Lee et al., "How to Correctly Report LLM-as-a-Judge Evaluations" (arXiv 2511.21140): the
  Rogan–Gladen correction of a judge's pass rate with the judge's specificity and
  sensitivity estimated on a gold set, and its delta-method variance.
- Cohen, "A Coefficient of Agreement for Nominal Scales" (Educational and Psychological
  Measurement, 1960): kappa and its large-sample standard error.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from statistics import NormalDist

from ._estimate import Estimate

__all__ = ["corrected_proportion", "cohen_kappa"]

_NORMAL = NormalDist()


def corrected_proportion(
    p: float,
    n: int,
    *,
    q0: float,
    m0: int,
    q1: float,
    m1: int,
    confidence: float = 0.95,
) -> Estimate:
    """The pass rate a perfect judge would report, from an imperfect judge's pass rate.

    The judge passed a share ``p`` of ``n`` items. On a gold set it recognised ``q0`` of
    ``m0`` gold negatives as failing (its specificity) and ``q1`` of ``m1`` gold positives as
    passing (its sensitivity). Then ``p = θ·q1 + (1 − θ)(1 − q0)`` for the true rate θ, and
    the Rogan–Gladen estimator inverts it (Lee et al., eq. for θ̂)::

        θ = (p + q0 − 1) / (q0 + q1 − 1),   clipped to [0, 1]

    with the delta-method variance, which counts the test set's noise and the gold set's::

        Var(θ) = [p(1 − p)/n + (1 − θ)² q0(1 − q0)/m0 + θ² q1(1 − q1)/m1] / (q0 + q1 − 1)²

    and the interval ``θ ± z·SE`` (z the normal quantile), clipped to [0, 1].
    p = 0.70, n = 1000, q0 = 0.85, q1 = 0.90, m0 = m1 = 100 gives θ = 0.7333, SE 0.0373.

    Args:
        p: the judge's observed pass rate on the test items, in [0, 1].
        n: the number of test items, at least 1.
        q0: the judge's specificity: the share of gold negatives it failed, in [0, 1].
        m0: the number of gold negatives, at least 1.
        q1: the judge's sensitivity: the share of gold positives it passed, in [0, 1].
        m1: the number of gold positives, at least 1.
        confidence: the interval's confidence level, in (0, 1).

    Returns:
        An :class:`Estimate` with ``method="rogan-gladen"``, ``n`` the test items.

    Raises:
        ValueError: ``q0 + q1 ≤ 1`` (the judge is no better than chance, or inverted: its
            verdicts carry no information to correct), rates outside [0, 1], counts < 1, or a
            confidence outside (0, 1).
    """
    _check_confidence(confidence)
    for name, rate in (("p", p), ("q0", q0), ("q1", q1)):
        if not (isinstance(rate, int | float) and 0.0 <= rate <= 1.0):
            msg = f"corrected_proportion needs {name} as a rate in [0, 1], not {rate!r}"
            raise ValueError(msg)
    for name, count in (("n", n), ("m0", m0), ("m1", m1)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            msg = f"corrected_proportion needs {name} as a whole number >= 1, not {count!r}"
            raise ValueError(msg)
    youden = q0 + q1 - 1.0
    if youden <= 0.0:
        msg = (
            f"corrected_proportion: the judge's specificity q0={q0:.4g} plus sensitivity "
            f"q1={q1:.4g} is {q0 + q1:.4g} <= 1, so it is no better than chance and its pass "
            "rate cannot be corrected; improve the judge (its instructions, or a stronger "
            "model) or check the gold labels"
        )
        raise ValueError(msg)
    theta = min(1.0, max(0.0, (p + q0 - 1.0) / youden))
    variance = (
        p * (1.0 - p) / n
        + (1.0 - theta) ** 2 * q0 * (1.0 - q0) / m0
        + theta**2 * q1 * (1.0 - q1) / m1
    ) / youden**2
    se = math.sqrt(variance)
    half = _NORMAL.inv_cdf(0.5 + confidence / 2) * se
    low, high = max(0.0, theta - half), min(1.0, theta + half)
    return Estimate(theta, se, low, high, n, method="rogan-gladen", confidence=confidence)


def cohen_kappa(
    a: Sequence[Hashable], b: Sequence[Hashable], *, confidence: float = 0.95
) -> Estimate:
    """Cohen's kappa: how far two raters agree beyond what chance would give.

    With ``pₒ`` the share of items both raters label alike and ``pₑ = Σ_k pₐ(k)·p_b(k)`` the
    agreement expected if each rated at random with its own label frequencies::

        κ = (pₒ − pₑ) / (1 − pₑ)

    1 is perfect agreement, 0 chance level, negative worse than chance. The standard error is
    Cohen's (1960) large-sample one, ``√(pₒ(1 − pₒ) / (n (1 − pₑ)²))``, with a normal interval
    clipped to [−1, 1]. The same κ as scikit-learn's ``cohen_kappa_score`` (unweighted).

    Args:
        a: the first rater's labels, one per item (any hashable values: 0/1, ``"C"``...).
        b: the second rater's labels for the same items, in the same order.
        confidence: the interval's confidence level, in (0, 1).

    Returns:
        An :class:`Estimate` with ``method="cohen"``, ``n`` the items.

    Raises:
        ValueError: sequences of different lengths or empty, or both raters giving one and the
            same label to every item (``pₑ = 1``: kappa is undefined), or a bad confidence.
    """
    _check_confidence(confidence)
    xs, ys = list(a), list(b)
    if len(xs) != len(ys):
        msg = (
            f"cohen_kappa got {len(xs)} labels in a and {len(ys)} in b; give both raters' "
            "labels for the same items, in the same order"
        )
        raise ValueError(msg)
    n = len(xs)
    if n == 0:
        msg = "cohen_kappa needs at least one rated item"
        raise ValueError(msg)
    observed = sum(x == y for x, y in zip(xs, ys, strict=True)) / n
    count_a, count_b = Counter(xs), Counter(ys)
    expected = math.fsum(count_a[k] * count_b[k] for k in count_a) / (n * n)
    if expected >= 1.0:
        msg = (
            "cohen_kappa is undefined when both raters give one and the same label to every "
            f"item (here {xs[0]!r}): there is no disagreement chance could explain; rate "
            "items that differ"
        )
        raise ValueError(msg)
    kappa = (observed - expected) / (1.0 - expected)
    if n == 1:
        return Estimate(kappa, None, None, None, 1, method="cohen", confidence=confidence)
    se = math.sqrt(observed * (1.0 - observed) / n) / (1.0 - expected)
    half = _NORMAL.inv_cdf(0.5 + confidence / 2) * se
    low, high = max(-1.0, kappa - half), min(1.0, kappa + half)
    return Estimate(kappa, se, low, high, n, method="cohen", confidence=confidence)


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        msg = f"confidence must lie strictly between 0 and 1 (e.g. 0.95), not {confidence!r}"
        raise ValueError(msg)

