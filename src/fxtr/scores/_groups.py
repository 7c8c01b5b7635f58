"""Groups: the statistics of a group of cases, for the report.

The mean, its interval, the gate and pass@k; the choices are ``fxtr.scores``'s.
"""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from fxtr.scores._cases import (
    _BINARY_FLAG,
    _K,
    _N,
    _SAMPLES,
    _UNIT_FLAG,
    _VALUE,
    FLAKY,
    CaseScore,
    Key,
    Scores,
    _check_options,
    _clip,
    _labels,
    _passed,
    _scores,
    label,
)
from fxtr.stats import (
    Estimate,
    mean_ci,
    pass_at_k,
    pass_hat_k,
    proportion_ci,
)

# --------------------------------------------------------------------------- groups


def group_statistics(
    cases: Mapping[Key, CaseScore],
    *,
    threshold: float | None = None,
    clusters: Mapping[Key, Hashable] | None = None,
    confidence: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """The statistics and gate of one group of cases (the report's score group).

    Args:
        cases: the group's cases, as :func:`case_scores` gives them.
        threshold: the mean the group must reach to pass, or ``None`` (no gate).
        clusters: a cluster label per case key (every scored case needs one), or ``None``.
        confidence: the intervals' confidence level.
        bounds: the range the score can take, if known better than the module's inference.

    Returns:
        ``{"mean", "stderr", "n", "missing", "incomplete", "low", "high", "interval",
        "confidence", "clusters", "range", "binary", "threshold", "passed", "cases", "flaky",
        "pass_at", "pass_hat"}``: ``n`` scored cases, ``interval`` one of ``wilson``, ``t``,
        ``clustered-t`` (``None`` with no scored case), ``clusters`` their number (or
        ``None``), ``range`` ``[low, high]`` or ``None``; ``cases`` (``{case label: {"k", "n",
        "verdict"}}``), ``flaky`` (case labels), ``pass_at`` and ``pass_hat`` (``{k: {"value",
        "stderr"}}``) for a binary score with samples, else empty.

    Raises:
        ValueError: a scored case without a cluster label, or bad ``confidence``/``bounds``.
    """
    _check_options(bounds, confidence)
    keys, scored = list(cases), list(cases.values())
    values: list[Any] = list(map(_VALUE, scored))
    missing = values.count(None)
    if missing:
        keys = [key for key, cs in zip(keys, scored, strict=True) if cs[0] is not None]
        scored = [cs for cs in scored if cs[0] is not None]
        values = list(map(_VALUE, scored))
    incomplete = sum(map(operator.lt, map(_N, scored), map(_SAMPLES, scored)))
    binary = bool(scored) and all(map(_BINARY_FLAG, scored))
    unit = bool(scored) and (binary or all(map(_UNIT_FLAG, scored)))
    span = bounds or ((0.0, 1.0) if unit else None)
    labels = _labels(keys, clusters)
    est = _interval(values, labels, span == (0.0, 1.0), confidence) if values else None
    mean = est.value if est else None
    out: dict[str, Any] = {
        "mean": mean,
        "stderr": est.stderr if est else None,
        "n": len(values),
        "missing": missing,
        "incomplete": incomplete,
        "low": _clip(est.low, span) if est else None,
        "high": _clip(est.high, span) if est else None,
        "interval": est.method if est else None,
        "confidence": confidence,
        "clusters": est.clusters if est else None,
        "range": list(span) if span else None,
        "binary": binary,
        "threshold": threshold,
        "passed": _passed(mean, threshold, missing + incomplete),
        "cases": {},
        "flaky": [],
        "pass_at": {},
        "pass_hat": {},
    }
    if binary and max(map(_SAMPLES, scored)) > 1:
        out.update(_sampled(keys, scored, labels))
    return out


def report_groups(
    cells: Iterable[Mapping[str, Any]] | Scores,
    *,
    threshold: float | None = None,
    clusters: Mapping[Key, Hashable] | None = None,
    confidence: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> list[dict[str, Any]]:
    """:func:`group_statistics` of every group, each with its ``"group"`` dict.

    ``cells`` are the evaluation's cells, or what :func:`case_scores` made of them (pass that
    when the same run is also compared, so its cells are reduced once).
    """
    return [
        {"group": dict(group)}
        | group_statistics(
            cases, threshold=threshold, clusters=clusters, confidence=confidence, bounds=bounds
        )
        for group, cases in _scores(cells).items()
    ]


def _interval(
    values: list[float], labels: list[Hashable] | None, unit: bool, confidence: float
) -> Estimate:
    if labels is not None:
        return mean_ci(values, clusters=labels, confidence=confidence)
    if unit and values.count(1) + values.count(0) == len(values):
        return proportion_ci(values.count(1), len(values), confidence=confidence)
    return mean_ci(values, confidence=confidence)


def _sampled(
    keys: list[Key], scored: list[CaseScore], labels: list[Hashable] | None
) -> dict[str, Any]:
    """Per-case k/n and verdicts, flaky cases, pass@k and pass^k across cases."""
    cases: dict[str, dict[str, Any]] = {}
    flaky = []
    for key, cs in zip(keys, scored, strict=True):
        name = str(key[0][1]) if len(key) == 1 else label(key)
        cases[name] = {"k": cs[3], "n": cs[1], "verdict": cs[4]}
        if cs[4] == FLAKY:
            flaky.append(name)
    flaky.sort()
    # A case's pass@k depends on its (n, c) only: count the cases per (n, c) (per cluster too)
    # and the statistics across thousands of cases take a few dozen evaluations.
    pairs = list(zip(map(_N, scored), map(_K, scored), strict=True))
    counts = Counter(pairs)
    per_cluster: list[Counter[tuple[int, int]]] | None = None
    if labels is not None:
        grouped: dict[Hashable, Counter[tuple[int, int]]] = {}
        for (group, nc), w in Counter(zip(labels, pairs, strict=True)).items():
            grouped.setdefault(group, Counter())[nc] += w
        per_cluster = list(grouped.values())
    pass_at: dict[int, dict[str, float | None]] = {}
    pass_hat: dict[int, dict[str, float | None]] = {}
    for k in range(1, min(n for n, _ in counts) + 1):
        for table, estimator in ((pass_at, pass_at_k), (pass_hat, pass_hat_k)):
            by_count = {nc: estimator(nc[0], nc[1], k) for nc in counts}
            table[k] = _weighted_mean(by_count, counts, per_cluster)
    return {"cases": cases, "flaky": flaky, "pass_at": pass_at, "pass_hat": pass_hat}


def _weighted_mean(
    values: Mapping[tuple[int, int], float],
    counts: Mapping[tuple[int, int], int],
    per_cluster: list[Counter[tuple[int, int]]] | None,
) -> dict[str, float | None]:
    """Mean and standard error across cases of a per-case value that depends on (n, c) only.

    The same numbers as :func:`fxtr.stats.mean_ci` over the per-case values (clustered with
    ``per_cluster``, the (n, c) counts of each cluster), from the counts alone.
    """
    total = sum(counts.values())
    mean = min(1.0, max(0.0, math.fsum(values[nc] * w for nc, w in counts.items()) / total))
    flat = len(set(values.values())) == 1
    if per_cluster is None:
        if total < 2:
            return {"value": mean, "stderr": None}
        ss = 0.0 if flat else math.fsum(w * (values[nc] - mean) ** 2 for nc, w in counts.items())
        return {"value": mean, "stderr": math.sqrt(ss / (total - 1) / total)}
    c = len(per_cluster)
    if c < 2:
        return {"value": mean, "stderr": None}
    sums = [
        math.fsum(w * (values[nc] - mean) for nc, w in cluster.items()) for cluster in per_cluster
    ]
    between = 0.0 if flat else math.fsum(x * x for x in sums)
    return {"value": mean, "stderr": math.sqrt(between * c / (c - 1)) / total}
