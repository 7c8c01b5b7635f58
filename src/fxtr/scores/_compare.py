"""Comparisons: this run against a baseline, per group, paired by case keys.

The verdict, the flipped cases and the minimum detectable effect; the choices are
``fxtr.scores``'s (its "Comparisons").
"""

# ruff: noqa: RUF002  (the formulas are written in mathematical notation)

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, cast

from fxtr.scores._cases import (
    _GATE_SLACK,
    _UNIT_FLAG,
    _VALUE,
    CaseScore,
    Key,
    Scores,
    _check_options,
    _clip,
    _labels,
    _scores,
    label,
)
from fxtr.stats import (
    minimum_detectable_effect,
    paired_difference,
)

REGRESSED = "regressed"
IMPROVED = "improved"
NO_CHANGE = "no significant change"
NOT_COMPARED = "not compared"
"""The verdict of a group where fewer than two cases pair: nothing was measured."""
MIN_PAIRED = 2
"""Paired cases a group needs for a verdict other than ``not compared``."""


def compare(
    baseline_cells: Iterable[Mapping[str, Any]] | Scores,
    cells: Iterable[Mapping[str, Any]] | Scores,
    *,
    margin: float = 0.0,
    confidence: float = 0.95,
    threshold: float | None = None,
    clusters: Mapping[Key, Hashable] | None = None,
    bounds: tuple[float, float] | None = None,
) -> list[dict[str, Any]]:
    """This run against a baseline run, per group, paired by case keys.

    Args:
        baseline_cells: the baseline run's cells (or their :func:`case_scores`).
        cells: this run's cells (or their :func:`case_scores`).
        margin: how far below 0 the whole interval of the difference must lie for
            ``regressed`` (≥ 0).
        confidence: the interval's confidence level (and 1 − the MDE's α).
        threshold: the gate's threshold: a case passes at or above it (see the module).
        clusters: a cluster label per case key, for a clustered interval of the difference.
        bounds: the range the score can take, if known better than the module's inference.

    Returns:
        One dict per group (this run's groups in order, then the baseline's others):
        ``{"group", "mean" (the baseline's), "run_mean", "delta", "stderr", "low", "high",
        "interval", "n_paired", "flipped": {"to_fail": [...], "to_pass": [...]}, "pass_bar",
        "mde", "verdict", "margin", "only_in_baseline", "only_in_run"}``.

    Raises:
        ValueError: a negative margin, or as :func:`case_scores` and :func:`group_statistics`.
    """
    if not (math.isfinite(margin) and margin >= 0):
        msg = f"margin must be a finite number >= 0 (a difference the run may lose), not {margin!r}"
        raise ValueError(msg)
    _check_options(bounds, confidence)
    base, run = _scores(baseline_cells), _scores(cells)
    groups = list(run) + [g for g in base if g not in run]
    return [
        _compare_group(
            group,
            base.get(group, {}),
            run.get(group, {}),
            margin,
            confidence,
            threshold,
            clusters,
            bounds,
        )
        for group in groups
    ]


def _compare_group(
    group: Key,
    base: Mapping[Key, CaseScore],
    run: Mapping[Key, CaseScore],
    margin: float,
    confidence: float,
    threshold: float | None,
    clusters: Mapping[Key, Hashable] | None,
    bounds: tuple[float, float] | None,
) -> dict[str, Any]:
    before, before_n, unit_before = _scored(base)
    after, after_n, unit_after = _scored(run)
    paired, a, b = _pairs(base, run)
    if None in a or None in b:
        kept = [i for i, pair in enumerate(zip(a, b, strict=True)) if None not in pair]
        paired, a, b = [paired[i] for i in kept], [a[i] for i in kept], [b[i] for i in kept]
    span = bounds or ((0.0, 1.0) if unit_before and unit_after and (before_n or after_n) else None)
    bar = threshold if threshold is not None else (0.5 if span == (0.0, 1.0) else None)
    out: dict[str, Any] = {
        "group": dict(group),
        "mean": before,
        "run_mean": after,
        **dict.fromkeys(("delta", "stderr", "low", "high", "interval")),
        "n_paired": len(paired),
        "flipped": _flips(paired, b, a, bar),
        "pass_bar": bar,
        "mde": None,
        "verdict": NO_CHANGE,
        "margin": margin,
        "only_in_baseline": before_n - len(paired),
        "only_in_run": after_n - len(paired),
    }
    if len(paired) < MIN_PAIRED:
        out["verdict"] = NOT_COMPARED
    if not paired:
        return out
    est = paired_difference(
        cast(list[float], a),
        cast(list[float], b),
        clusters=_labels(paired, clusters),
        confidence=confidence,
    )
    width = (span[0] - span[1], span[1] - span[0]) if span else None
    low, high = _clip(est.low, width), _clip(est.high, width)
    out.update(delta=est.value, stderr=est.stderr, low=low, high=high, interval=est.method)
    if est.stderr is not None:  # the SD of the differences: stderr·√n
        sd = est.stderr * math.sqrt(est.n)
        out["mde"] = minimum_detectable_effect(est.n, sd, alpha=1 - confidence)
    if len(paired) < MIN_PAIRED:
        return out
    if high is not None and high < -margin:
        out["verdict"] = REGRESSED
    elif low is not None and low > 0:
        out["verdict"] = IMPROVED
    return out


def _scored(cases: Mapping[Key, CaseScore]) -> tuple[float | None, int, bool]:
    """The mean over the scored cases, their number, and whether the score lies in [0, 1]."""
    values = [v for v in map(_VALUE, cases.values()) if v is not None]
    if not values:
        return None, 0, True
    unit = all(map(_UNIT_FLAG, cases.values()))
    return math.fsum(values) / len(values), len(values), unit


def _pairs(
    base: Mapping[Key, CaseScore], run: Mapping[Key, CaseScore]
) -> tuple[list[Key], list[float | None], list[float | None]]:
    """The case keys of both runs and each run's values for them (``None`` where missing)."""
    keys = list(run)
    if len(base) == len(keys) and list(base) == keys:  # the usual case: no key lookups at all
        return keys, list(map(_VALUE, run.values())), list(map(_VALUE, base.values()))
    paired = [key for key in keys if key in base]
    return paired, [run[key][0] for key in paired], [base[key][0] for key in paired]


def _flips(
    paired: list[Key], before: list[Any], after: list[Any], bar: float | None
) -> dict[str, list[str]]:
    flipped: dict[str, list[str]] = {"to_fail": [], "to_pass": []}
    if bar is None:
        return flipped
    cut = bar - _GATE_SLACK * max(1.0, abs(bar))
    for key, was, now in zip(paired, before, after, strict=True):
        if (was >= cut) != (now >= cut):
            flipped["to_pass" if now >= cut else "to_fail"].append(label(key))
    flipped["to_fail"].sort()
    flipped["to_pass"].sort()
    return flipped
