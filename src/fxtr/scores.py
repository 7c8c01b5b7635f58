"""Score logic shared by the plugin, the report and ``fxtr compare`` (DESIGN §7, §8).

Pure functions over the ``cells`` of an evaluation (``/work/notes/interfaces.md``): one cell
per case and group, ``{"group": {dim: key}, "case": {dim: key}, "values": [per-sample score
or None], "status": "ok" | "missing"}``. They return plain, JSON-ready dicts; rendering is the
caller's business. Group and case keys are tuples of ``(dim, key)`` pairs sorted by dimension
name (:func:`key_of`), hashable and turned back into a dict with ``dict(key)``.

The choices where the contract leaves room, made once here:

- **Per-case reduction.** A case's score is the mean of its samples that have a value. A cell
  whose status is ``"missing"``, or whose values are all ``None``, is a *missing* case: it is
  counted, never scored. A cell with some ``None`` samples is *incomplete*: it is scored on the
  samples it has and counted apart. Every group statistic is computed across cases, never by
  pooling samples.
- **Binary scores.** A score is binary when every value of every cell given to
  :func:`case_scores` is 0 or 1 (a bool is 0/1): binary is a property of the eval's score, not
  of a group that happened to score only 0s and 1s. Binary cases get ``k`` of ``n`` samples
  passed and a verdict: ``stable_pass`` (k = n), ``stable_fail`` (k = 0) or ``flaky``.
- **Which interval.** With ``clusters``: the clustered t interval (``clustered-t``, Miller eq.
  4 with C/(C − 1), on C − 1 df). Otherwise, when every per-case score of the group is 0 or 1
  and the score's range is [0, 1] (a binary score with one sample per case, or with samples
  and every case stable): the Wilson interval (``wilson``) on successes = cases scoring 1 of n
  cases, which never has zero width (20 stable passes read [0.839, 1], not [1, 1]).
  Otherwise (per-case scores that are fractions k/n of a binary score, or any other number):
  the t interval on n − 1 df (``t``). Pooling the samples into one Wilson proportion would
  treat the draws of one case as independent cases and give intervals far too narrow; the t
  interval over per-case means is the one DESIGN §7 asks for, and it shrinks as samples
  reduce each case's variance (Miller §3.1).
- **The score's range.** Intervals are clipped to the range the score can take: the
  ``bounds`` given, else [0, 1] for a binary score or when every value lies in [0, 1] (the
  convention of ``Score`` values and of every kit scorer), else unbounded. A group of one scored
  case has no t interval (``low``/``high`` ``None``; Wilson still gives one).
- **The gate.** Without a threshold a group always passes. With one, it passes when its mean
  is at least the threshold (less a relative 1e-12, so 4/5 = 0.8 meets 0.8 whatever the
  rounding), and no case is missing or incomplete.
- **pass@k and pass^k** (binary scores with more than one sample per case): for every k from 1
  to the smallest number of samples any scored case has, Chen et al.'s unbiased pass@k and
  C(c, k)/C(n, k) per case, averaged across cases, with the standard error across cases
  (clustered when ``clusters`` are given). Keys are ints (JSON turns them into strings).
- **Comparisons.** Cases are paired by their case key within a group; a case is in a run when
  it has a value there, so a case missing in one run counts in ``only_in_baseline`` or
  ``only_in_run`` and is never paired. ``delta`` is the mean paired difference (this run minus
  the baseline) with the t interval of :func:`fxtr.stats.paired_difference`; ``mean`` is the
  baseline's mean over all its scored cases and ``run_mean`` this run's (so they differ from
  ``delta`` only when some cases are unpaired). A case *passes* when its score is at least the
  threshold, or without one at least 0.5 for a score in [0, 1] (for a binary score with one
  sample: it scored 1; with samples: it passed in at least half of them); ``flipped`` lists the
  paired cases that crossed that bar (empty, with ``pass_bar`` ``None``, for an unbounded score
  without a threshold). ``mde`` is the minimum detectable effect at 80% power and
  α = 1 − confidence from the SD of the paired differences (``stderr · √n``, which carries the
  clustering's design effect). The verdict is ``regressed`` when the whole interval lies below
  ``−margin``, ``improved`` when it lies above 0, else ``no significant change`` (also with
  fewer than two pairs, where no interval exists).
"""

# ruff: noqa: RUF002  (the formulas are written in mathematical notation)

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from fxtr.stats import (
    Estimate,
    mean_ci,
    minimum_detectable_effect,
    paired_difference,
    pass_at_k,
    pass_hat_k,
    proportion_ci,
)

__all__ = [
    "CaseScore",
    "Key",
    "STABLE_FAIL",
    "STABLE_PASS",
    "FLAKY",
    "case_scores",
    "compare",
    "group_statistics",
    "key_of",
    "label",
    "report_groups",
]

Key = tuple[tuple[str, Any], ...]
"""A group or case key: ``(dim, key)`` pairs sorted by dimension name."""

STABLE_PASS = "stable_pass"
STABLE_FAIL = "stable_fail"
FLAKY = "flaky"

REGRESSED = "regressed"
IMPROVED = "improved"
NO_CHANGE = "no significant change"

_GATE_SLACK = 1e-12


@dataclasses.dataclass(frozen=True, slots=True)
class CaseScore:
    """One case's score, reduced over its samples.

    Attributes:
        value: the mean of the samples that have a value; ``None`` for a missing case.
        n: how many samples have a value.
        samples: how many samples the cell has (with or without a value).
        k: how many samples scored 1 (binary scores only, else ``None``).
        verdict: ``stable_pass``, ``stable_fail`` or ``flaky`` (binary scores with a value).
        binary: every value of the eval's cells is 0 or 1.
        unit: every value of the eval's cells lies in [0, 1].
    """

    value: float | None
    n: int
    samples: int
    k: int | None = None
    verdict: str | None = None
    binary: bool = False
    unit: bool = False

    @property
    def missing(self) -> bool:
        """The case has no value (its cell is missing, or every sample is)."""
        return self.value is None

    @property
    def incomplete(self) -> bool:
        """The case has a value, but some of its samples have none."""
        return self.value is not None and self.n < self.samples


def key_of(mapping: Mapping[str, Any]) -> Key:
    """The hashable key of a ``{dim: key}`` dict (``dict(key_of(d)) == d``)."""
    return tuple(sorted(mapping.items()))


def label(key: Key) -> str:
    """A case or group key as text: the key alone for one dimension, else ``dim=key,...``."""
    if len(key) == 1:
        return str(key[0][1])
    return ",".join(f"{dim}={value}" for dim, value in key)


# --------------------------------------------------------------------------- cases


def case_scores(cells: Iterable[Mapping[str, Any]]) -> dict[Key, dict[Key, CaseScore]]:
    """Each case's score per group: the mean over its samples, and k/n with a verdict when binary.

    Args:
        cells: the evaluation's cells (see the module docstring).

    Returns:
        ``{group key: {case key: CaseScore}}``, groups and cases in the order of the cells.

    Raises:
        ValueError: a case that appears twice in one group, or a value that is not a finite
            number.
    """
    rows: list[tuple[Key, Key, float | None, int, int]] = []
    binary = unit = True
    seen = False
    for cell in cells:
        group, case = key_of(cell["group"]), key_of(cell["case"])
        values: Sequence[Any] = cell.get("values") or ()
        present = [] if cell.get("status") == "missing" else [v for v in values if v is not None]
        total: float | None = None
        if present:
            total = _total(present, group, case)
            seen = True
            if binary:
                binary = all(v == 0 or v == 1 for v in present)
            if unit:
                unit = min(present) >= 0 and max(present) <= 1
        rows.append((group, case, total, len(present), len(values)))
    binary = binary and seen
    unit = unit and seen
    out: dict[Key, dict[Key, CaseScore]] = {}
    for group, case, total, n, samples in rows:
        cases = out.setdefault(group, {})
        if case in cases:
            msg = (
                f"case {label(case)!r} appears twice in group {dict(group)!r}; "
                "give each case of a group one cell (its samples are its values)"
            )
            raise ValueError(msg)
        cases[case] = _case_score(total, n, samples, binary, unit)
    return out


def _total(present: list[Any], group: Key, case: Key) -> float:
    try:
        total = math.fsum(present)
    except TypeError:
        total = math.nan
    if not math.isfinite(total):
        bad = next(
            (v for v in present if not isinstance(v, int | float) or not math.isfinite(v)),
            present,
        )
        msg = (
            f"case {label(case)!r} of group {dict(group)!r} has the score {bad!r}; "
            "scores must be finite numbers or bools (None for a missing sample)"
        )
        raise ValueError(msg)
    return total


def _case_score(
    total: float | None, n: int, samples: int, binary: bool, unit: bool
) -> CaseScore:
    if total is None:
        return CaseScore(None, 0, samples, binary=binary, unit=unit)
    value = total / n
    if not binary:
        return CaseScore(value, n, samples, binary=False, unit=unit)
    k = round(total)
    verdict = STABLE_PASS if k == n else STABLE_FAIL if k == 0 else FLAKY
    return CaseScore(value, n, samples, k, verdict, True, True)


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
    _check_bounds(bounds)
    scored = [(key, cs) for key, cs in cases.items() if cs.value is not None]
    values = [cs.value for _, cs in scored if cs.value is not None]
    missing = len(cases) - len(scored)
    incomplete = sum(1 for _, cs in scored if cs.n < cs.samples)
    binary = bool(scored) and all(cs.binary for _, cs in scored)
    span = bounds or ((0.0, 1.0) if scored and all(cs.unit for _, cs in scored) else None)
    labels = _labels(scored, clusters)
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
    if binary and max(cs.samples for _, cs in scored) > 1:
        out.update(_sampled(scored, labels))
    return out


def report_groups(
    cells: Iterable[Mapping[str, Any]],
    *,
    threshold: float | None = None,
    clusters: Mapping[Key, Hashable] | None = None,
    confidence: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> list[dict[str, Any]]:
    """:func:`group_statistics` of every group of ``cells``, each with its ``"group"`` dict."""
    return [
        {"group": dict(group)}
        | group_statistics(cases, threshold=threshold, clusters=clusters,
                           confidence=confidence, bounds=bounds)
        for group, cases in case_scores(cells).items()
    ]


def _interval(
    values: list[float], labels: list[Hashable] | None, unit: bool, confidence: float
) -> Estimate:
    if labels is not None:
        return mean_ci(values, clusters=labels, confidence=confidence)
    if unit and all(v == 0 or v == 1 for v in values):
        return proportion_ci(round(math.fsum(values)), len(values), confidence=confidence)
    return mean_ci(values, confidence=confidence)


def _sampled(scored: list[tuple[Key, CaseScore]], labels: list[Hashable] | None) -> dict[str, Any]:
    """Per-case k/n and verdicts, flaky cases, pass@k and pass^k across cases."""
    cases = {label(key): {"k": cs.k, "n": cs.n, "verdict": cs.verdict} for key, cs in scored}
    flaky = sorted(label(key) for key, cs in scored if cs.verdict == FLAKY)
    smallest = min(cs.n for _, cs in scored)
    counts = Counter((cs.n, cs.k or 0) for _, cs in scored)
    pass_at: dict[int, dict[str, float | None]] = {}
    pass_hat: dict[int, dict[str, float | None]] = {}
    for k in range(1, smallest + 1):
        for table, estimator in ((pass_at, pass_at_k), (pass_hat, pass_hat_k)):
            by_count = {nc: estimator(nc[0], nc[1], k) for nc in counts}
            if labels is None:
                table[k] = _weighted_mean(by_count, counts)
            else:
                est = mean_ci([by_count[(cs.n, cs.k or 0)] for _, cs in scored], clusters=labels)
                table[k] = {"value": est.value, "stderr": est.stderr}
    return {"cases": cases, "flaky": flaky, "pass_at": pass_at, "pass_hat": pass_hat}


def _weighted_mean(
    values: Mapping[tuple[int, int], float], counts: Mapping[tuple[int, int], int]
) -> dict[str, float | None]:
    """Mean and standard error across cases of a per-case value that depends on (n, c) only."""
    total = sum(counts.values())
    mean = math.fsum(values[nc] * w for nc, w in counts.items()) / total
    mean = min(1.0, max(0.0, mean))
    if total < 2:
        return {"value": mean, "stderr": None}
    ss = math.fsum(w * (values[nc] - mean) ** 2 for nc, w in counts.items())
    if len(set(values.values())) == 1:
        ss = 0.0
    return {"value": mean, "stderr": math.sqrt(ss / (total - 1) / total)}


def _labels(
    scored: list[tuple[Key, CaseScore]], clusters: Mapping[Key, Hashable] | None
) -> list[Hashable] | None:
    if clusters is None:
        return None
    labels = []
    for key, _ in scored:
        if key not in clusters:
            msg = (
                f"case {label(key)!r} has no cluster label; give every case a value of the "
                "cluster field (or do not cluster)"
            )
            raise ValueError(msg)
        labels.append(clusters[key])
    return labels


def _passed(mean: float | None, threshold: float | None, missing: int) -> bool:
    if threshold is None:
        return True
    if mean is None or missing:
        return False
    return mean >= threshold - _GATE_SLACK * max(1.0, abs(threshold))


def _clip(x: float | None, span: tuple[float, float] | None) -> float | None:
    if x is None or span is None:
        return x
    return min(span[1], max(span[0], x))


def _check_bounds(bounds: tuple[float, float] | None) -> None:
    if bounds is not None and not (len(bounds) == 2 and bounds[0] <= bounds[1]):
        msg = f"bounds must be a (low, high) pair with low <= high, not {bounds!r}"
        raise ValueError(msg)


# --------------------------------------------------------------------------- baselines


def compare(
    baseline_cells: Iterable[Mapping[str, Any]],
    cells: Iterable[Mapping[str, Any]],
    *,
    margin: float = 0.0,
    confidence: float = 0.95,
    threshold: float | None = None,
    clusters: Mapping[Key, Hashable] | None = None,
    bounds: tuple[float, float] | None = None,
) -> list[dict[str, Any]]:
    """This run against a baseline run, per group, paired by case keys.

    Args:
        baseline_cells: the baseline run's cells.
        cells: this run's cells.
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
    _check_bounds(bounds)
    base, run = case_scores(baseline_cells), case_scores(cells)
    groups = list(run) + [g for g in base if g not in run]
    return [
        _compare_group(
            group, base.get(group, {}), run.get(group, {}), margin, confidence, threshold,
            clusters, bounds,
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
    base_scored = {k: cs for k, cs in base.items() if cs.value is not None}
    run_scored = {k: cs for k, cs in run.items() if cs.value is not None}
    paired = [k for k in run_scored if k in base_scored]
    everything = list(base_scored.values()) + list(run_scored.values())
    unit = bool(everything) and all(cs.unit for cs in everything)
    span = bounds or ((0.0, 1.0) if unit else None)
    bar = threshold if threshold is not None else (0.5 if unit else None)
    out: dict[str, Any] = {
        "group": dict(group),
        "mean": _mean(base_scored.values()),
        "run_mean": _mean(run_scored.values()),
        "delta": None,
        "stderr": None,
        "low": None,
        "high": None,
        "interval": None,
        "n_paired": len(paired),
        "flipped": _flips(paired, base_scored, run_scored, bar),
        "pass_bar": bar,
        "mde": None,
        "verdict": NO_CHANGE,
        "margin": margin,
        "only_in_baseline": sum(1 for k in base_scored if k not in run_scored),
        "only_in_run": len(run_scored) - len(paired),
    }
    if not paired:
        return out
    est = paired_difference(
        [run_scored[k].value or 0.0 for k in paired],
        [base_scored[k].value or 0.0 for k in paired],
        clusters=_labels([(k, run_scored[k]) for k in paired], clusters),
        confidence=confidence,
    )
    width = (span[0] - span[1], span[1] - span[0]) if span else None
    low, high = _clip(est.low, width), _clip(est.high, width)
    out.update(delta=est.value, stderr=est.stderr, low=low, high=high, interval=est.method)
    if est.stderr is not None:
        n = len(paired)
        out["mde"] = minimum_detectable_effect(n, est.stderr * math.sqrt(n),
                                               alpha=1 - confidence)
    if high is not None and high < -margin:
        out["verdict"] = REGRESSED
    elif low is not None and low > 0:
        out["verdict"] = IMPROVED
    return out


def _flips(
    paired: list[Key],
    base: Mapping[Key, CaseScore],
    run: Mapping[Key, CaseScore],
    bar: float | None,
) -> dict[str, list[str]]:
    flipped: dict[str, list[str]] = {"to_fail": [], "to_pass": []}
    if bar is None:
        return flipped
    cut = bar - _GATE_SLACK * max(1.0, abs(bar))
    for key in paired:
        was, now = (base[key].value or 0.0) >= cut, (run[key].value or 0.0) >= cut
        if was != now:
            flipped["to_pass" if now else "to_fail"].append(label(key))
    flipped["to_fail"].sort()
    flipped["to_pass"].sort()
    return flipped


def _mean(cases: Iterable[CaseScore]) -> float | None:
    values = [cs.value for cs in cases if cs.value is not None]
    return math.fsum(values) / len(values) if values else None
