"""Score logic shared by the plugin, the report and ``fxtr compare`` (DESIGN §7, §8).

Pure functions over the ``cells`` of an evaluation (``/work/notes/interfaces.md``): one cell
per case and group, ``{"group": {dim: key}, "case": {dim: key}, "values": [per-sample score
or None], "status": "ok" | "missing"}``. They return plain, JSON-ready dicts; rendering is the
caller's business. Group and case keys are tuples of ``(dim, key)`` pairs sorted by dimension
name (:func:`key_of`), hashable and turned back into a dict with ``dict(key)``. Reducing the
cells is the costly part (about 2 µs a cell): :func:`report_groups` and :func:`compare` also
take what :func:`case_scores` returned, so a run that is reported and compared is reduced once.

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
  the t interval on n − 1 df (``t``). Pooling samples into one Wilson proportion would take
  the draws of a case for independent cases (far too narrow); the t interval over per-case
  means is DESIGN §7's, and it shrinks as samples reduce each case's variance (Miller §3.1).
- **The score's range.** Intervals are clipped to the range the score can take: the
  ``bounds`` given, else [0, 1] for a binary score or when every value lies in [0, 1] (the
  convention of ``Score`` values and of every kit scorer), else unbounded. A group of one scored
  case has no t interval (``low``/``high`` ``None``; Wilson still gives one).
- **The gate.** Without a threshold a group passes. With one, it passes when its mean is at
  least the threshold (less a relative 1e-12: 4/5 meets 0.8) and no case is missing or
  incomplete.
- **pass@k and pass^k** (binary scores with samples): for every k up to the smallest n of a
  scored case, Chen et al.'s pass@k and C(c, k)/C(n, k) per case, averaged across cases with
  the standard error across cases (clustered with ``clusters``). Keys are ints.
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
  ``−margin``, ``improved`` when it lies above 0, else ``no significant change``; with
  fewer than two paired cases it is ``not compared`` (no interval exists, nothing was
  measured), never ``no significant change``.
"""

# ruff: noqa: RUF002  (the formulas are written in mathematical notation)

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, cast

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
    "FLAKY",
    "IMPROVED",
    "NOT_COMPARED",
    "NO_CHANGE",
    "REGRESSED",
    "STABLE_FAIL",
    "STABLE_PASS",
    "CaseScore",
    "Key",
    "Scores",
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
NOT_COMPARED = "not compared"
"""The verdict of a group where fewer than two cases pair: nothing was measured."""
MIN_PAIRED = 2
"""Paired cases a group needs for a verdict other than ``not compared``."""

_GATE_SLACK = 1e-12


class CaseScore(NamedTuple):
    """One case's score, reduced over its samples (a named tuple: cheap to make by the 10,000).

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
    items = tuple(mapping.items())
    return items if len(items) < 2 else tuple(sorted(items))


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
    # Hot: a 10,000-case report must cost milliseconds. One pass sums each case and builds it
    # as if the score were binary, gathering every sample value; whether it is binary (or in
    # [0, 1]) is then one scan in C over them all, and only a non-binary eval is rebuilt.
    # (A column-wise version of this loop, with map(), chain() and compress(), measured slower.)
    cells = cells if isinstance(cells, list | tuple) else list(cells)
    out: dict[Key, dict[Key, CaseScore]] = {}
    groups: dict[tuple[tuple[str, Any], ...], dict[Key, CaseScore]] = {}
    every: list[Any] = []
    fsum, isfinite, new = math.fsum, math.isfinite, _new
    passed, failed, flaky = STABLE_PASS, STABLE_FAIL, FLAKY
    last_group: Any = None  # cells come grouped: an equal group dict is the same group
    cases: dict[Key, CaseScore] = {}
    for cell in cells:
        group = cell["group"]
        if group != last_group:
            items = tuple(group.items())
            held = groups.get(items)
            if held is None:
                held = groups[items] = out.setdefault(key_of(group), {})
            cases, last_group = held, group
        case = cell["case"]
        case = tuple(case.items()) if len(case) == 1 else tuple(sorted(case.items()))
        values = cell.get("values") or ()
        if cell.get("status") == "missing":
            cases[case] = new(CaseScore, (None, 0, len(values), None, None, True, True))
            continue
        try:
            total = fsum(values)
            present = values
        except (TypeError, OverflowError):
            present = [v for v in values if v is not None]
            total = _total(present, cell)
        n = len(present)
        if not n:
            cases[case] = new(CaseScore, (None, 0, len(values), None, None, True, True))
            continue
        if not isfinite(total):
            _total(present, cell)
        every += present
        k = int(total)
        verdict = passed if k == n else failed if k == 0 else flaky
        cases[case] = new(CaseScore, (total / n, n, len(values), k, verdict, True, True))
    if sum(len(cases) for cases in out.values()) != len(cells):
        _raise_duplicate(cells)
    if every and every.count(1.0) + every.count(0.0) == len(every):
        return out
    unit = bool(every) and min(every) >= 0 and max(every) <= 1
    for cases in out.values():
        for case, cs in cases.items():
            cases[case] = new(CaseScore, (cs[0], cs[1], cs[2], None, None, False, unit))
    return out


_new = tuple.__new__


def _raise_duplicate(cells: Iterable[Mapping[str, Any]]) -> None:
    seen: set[tuple[Key, Key]] = set()
    for cell in cells:
        group, case = key_of(cell["group"]), key_of(cell["case"])
        if (group, case) in seen:
            msg = (
                f"case {label(case)!r} appears twice in group {dict(group)!r}; "
                "give each case of a group one cell (its samples are its values)"
            )
            raise ValueError(msg)
        seen.add((group, case))


def _total(present: Sequence[Any], cell: Mapping[str, Any]) -> float:
    """The sum of a case's sample scores; a ``ValueError`` naming the case for a bad one."""
    try:
        total = math.fsum(present)
    except (TypeError, OverflowError):
        total = math.nan
    if not math.isfinite(total):
        bad = next(
            (v for v in present if not isinstance(v, int | float) or not math.isfinite(v)),
            present,
        )
        msg = (
            f"case {label(key_of(cell['case']))!r} of group {dict(cell['group'])!r} has the "
            f"score {bad!r}; scores must be finite numbers or bools (None for a missing sample)"
        )
        raise ValueError(msg)
    return total


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


_VALUE, _N, _SAMPLES, _K = (operator.itemgetter(i) for i in range(4))
_BINARY_FLAG, _UNIT_FLAG = operator.itemgetter(5), operator.itemgetter(6)


Scores = Mapping[Key, Mapping[Key, CaseScore]]
"""What :func:`case_scores` returns: ``{group key: {case key: CaseScore}}``."""


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
        | group_statistics(cases, threshold=threshold, clusters=clusters,
                           confidence=confidence, bounds=bounds)
        for group, cases in _scores(cells).items()
    ]


def _scores(cells: Iterable[Mapping[str, Any]] | Scores) -> Scores:
    return cells if isinstance(cells, Mapping) else case_scores(cells)


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
    sums = [math.fsum(w * (values[nc] - mean) for nc, w in cluster.items())
            for cluster in per_cluster]
    between = 0.0 if flat else math.fsum(x * x for x in sums)
    return {"value": mean, "stderr": math.sqrt(between * c / (c - 1)) / total}


def _labels(keys: list[Key], clusters: Mapping[Key, Hashable] | None) -> list[Hashable] | None:
    if clusters is None:
        return None
    try:
        return [clusters[key] for key in keys]
    except KeyError as error:
        msg = (
            f"case {label(error.args[0])!r} has no cluster label; give every case a value of "
            "the cluster field (or do not cluster)"
        )
        raise ValueError(msg) from None


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


def _check_options(bounds: tuple[float, float] | None, confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        msg = f"confidence must lie strictly between 0 and 1 (e.g. 0.95), not {confidence!r}"
        raise ValueError(msg)
    if bounds is not None and not (len(bounds) == 2 and bounds[0] <= bounds[1]):
        msg = f"bounds must be a (low, high) pair with low <= high, not {bounds!r}"
        raise ValueError(msg)


# --------------------------------------------------------------------------- baselines


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
        cast(list[float], a), cast(list[float], b), clusters=_labels(paired, clusters),
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
