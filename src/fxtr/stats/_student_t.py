# ruff: noqa: RUF002, RUF003  (the formulas are written in mathematical notation)
"""The Student t distribution without scipy: its CDF and quantile, for :mod:`fxtr.stats`.

The t distribution's tail is the regularized incomplete beta function ``I_x(ν/2, 1/2)`` with
``x = ν/(ν + t²)``, evaluated by its continued fraction (modified Lentz); the quantile is found
by Newton's method on that tail inside a bisection bracket, starting from the Cornish-Fisher
expansion around the normal quantile. For ν ≥ 10⁵ the four-term Cornish-Fisher expansion
alone is used (its error there is below 1e-14). The tests check both against scipy to 1e-10.
Standard library only, like the package.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

__all__ = ["t_cdf", "t_quantile"]

_NORMAL = NormalDist()


def t_cdf(x: float, df: float) -> float:
    """The Student t distribution's CDF ``P(T ≤ x)`` on ``df`` degrees of freedom.

    ``P(T > |x|) = ½ · I_{ν/(ν+x²)}(ν/2, ½)``, the regularized incomplete beta function,
    evaluated by its continued fraction; for ν ≥ 10⁵ (where that fraction needs hundreds of
    terms and their rounding adds up) ``Φ(z)`` with z the normal deviate whose Cornish-Fisher
    t quantile is x, the exact inverse of :func:`t_quantile` there. ``df`` may be any positive
    number or ``math.inf`` (the normal distribution).

    Raises:
        ValueError: df not > 0, or x not a number.
    """
    nu = _check_df(df)
    if math.isnan(x):
        msg = "t_cdf needs a number, not NaN"
        raise ValueError(msg)
    if math.isinf(nu):
        return _NORMAL.cdf(x)
    if nu >= 1e5:
        return _NORMAL.cdf(_cornish_fisher_inverse(x, nu))
    tail = _t_tail(abs(x), nu)
    return tail if x < 0 else 1.0 - tail


@functools.lru_cache(maxsize=1024)
def t_quantile(p: float, df: float) -> float:
    """The Student t quantile: the ``x`` with ``P(T ≤ x) = p`` on ``df`` degrees of freedom.

    Exact closed forms for ν = 1 (``cot(π(1 − p))``) and ν = 2 (``(2p − 1)/√(2p(1 − p))``);
    for ν ≥ 10⁵ the Cornish-Fisher expansion to 1/ν⁴ (error below 1e-14); otherwise Newton's
    method on the tail of :func:`t_cdf` inside a bisection bracket, started from that
    expansion, to full double precision. ``df = math.inf`` gives the normal quantile.

    Raises:
        ValueError: p outside (0, 1) or df not > 0.
    """
    nu = _check_df(df)
    if not 0.0 < p < 1.0:
        msg = f"t_quantile needs a probability strictly between 0 and 1, not {p!r}"
        raise ValueError(msg)
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, nu)
    if math.isinf(nu):
        return _NORMAL.inv_cdf(p)
    q = 1.0 - p  # exact for p > ½; the upper tail keeps the precision near p = 1
    if nu == 1.0:
        return 1.0 / math.tan(math.pi * q)
    if nu == 2.0:
        return (1 - 2 * q) * math.sqrt(2 / (4 * q * (1 - q)))
    guess = _cornish_fisher(_NORMAL.inv_cdf(p), nu)
    if nu >= 1e5:
        return guess
    return _t_tail_inverse(q, nu, guess)


def _cornish_fisher(z: float, nu: float) -> float:
    """The t quantile from the normal quantile z, to the 1/ν⁴ term (Fisher 1925)."""
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    return z + (g1 + (g2 + (g3 + g4 / nu) / nu) / nu) / nu


def _cornish_fisher_inverse(x: float, nu: float) -> float:
    """The normal deviate z whose Cornish-Fisher t quantile is x (Newton; for large ν)."""
    z = x
    for _ in range(20):
        step = (_cornish_fisher(z, nu) - x) / (1 + (3 * z * z + 1) / (4 * nu))
        z -= step
        if abs(step) <= 1e-16 * max(1.0, abs(z)):
            break
    return z


def _t_tail_inverse(q: float, nu: float, guess: float) -> float:
    """The t > 0 with ``P(T > t) = q`` (q < ½): safeguarded Newton from ``guess``."""
    lo, hi = 0.0, max(guess, 1.0)
    while _t_tail(hi, nu) > q:
        lo, hi = hi, hi * 2
    t = min(max(guess, lo), hi)
    for _ in range(200):
        f = _t_tail(t, nu) - q
        if f > 0:
            lo = t
        else:
            hi = t
        step = f / _t_pdf(t, nu)
        new = t + step
        if not lo < new < hi:
            new = (lo + hi) / 2
        if abs(new - t) <= 1e-15 * new or hi - lo <= 1e-15 * hi:
            return new
        t = new
    return t


def _t_pdf(t: float, nu: float) -> float:
    """The t density ``(1 + t²/ν)^(−(ν+1)/2) / (√ν · B(ν/2, ½))``."""
    return math.exp(
        -_log_beta_half(nu / 2) - 0.5 * math.log(nu) - (nu + 1) / 2 * math.log1p(t * t / nu)
    )


def _t_tail(t: float, nu: float) -> float:
    """``P(T > t)`` for t ≥ 0: ½ · I_x(ν/2, ½) with x = ν/(ν + t²)."""
    if t == 0:
        return 0.5
    a, b = nu / 2, 0.5
    t2 = t * t
    log_x = -math.log1p(t2 / nu)  # log(ν/(ν+t²))
    log_y = math.log(t2) - math.log(nu + t2)  # log(t²/(ν+t²))
    front = math.exp(a * log_x + b * log_y - _log_beta_half(a))
    x = math.exp(log_x)
    if x < (a + 1) / (a + b + 2):
        return 0.5 * front * _beta_continued_fraction(a, b, x) / a
    y = t2 / (nu + t2)
    return 0.5 * (1.0 - front * _beta_continued_fraction(b, a, y) / b)


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function, by the modified Lentz method.

    ``I_x(a, b) = x^a (1 − x)^b / (a · B(a, b)) · CF``; it converges quickly for
    ``x < (a + 1)/(a + b + 2)`` (the callers arrange it), in O(√max(a, b)) terms at worst.
    """
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return h


def _log_beta_half(a: float) -> float:
    """``log B(a, ½) = log Γ(a) + log √π − log Γ(a + ½)``, without cancellation for large a.

    For a ≥ 10 the difference ``log Γ(a + ½) − log Γ(a)`` is taken from Stirling's series,
    ``a·log1p(1/(2a)) + ½·log a − ½ + S(a + ½) − S(a)``, whose terms are all small; the
    difference of two ``lgamma`` values would lose ``log a`` digits of the result.
    """
    if a < 10:
        return math.lgamma(a) + math.lgamma(0.5) - math.lgamma(a + 0.5)
    ratio = a * math.log1p(0.5 / a) + 0.5 * math.log(a) - 0.5 + _stirling(a + 0.5) - _stirling(a)
    return 0.5 * math.log(math.pi) - ratio


def _stirling(z: float) -> float:
    """The correction terms of Stirling's series for log Γ(z) (accurate to 1e-16 for z ≥ 10)."""
    r = 1.0 / z
    r2 = r * r
    coefficients = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156)
    total = 0.0
    for coefficient in reversed(coefficients):
        total = total * r2 + coefficient
    return total * r


def _check_df(df: float) -> float:
    nu = float(df)
    if not nu > 0:
        msg = f"degrees of freedom must be > 0, not {df!r}"
        raise ValueError(msg)
    return nu
