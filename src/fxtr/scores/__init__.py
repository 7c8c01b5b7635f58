"""Score logic shared by the plugin, the report and ``fxtr compare`` (DESIGN §7, §8).

Pure functions over the ``cells`` of an evaluation (``docs/results.md``, "The evaluation
record"): one cell per case and group, ``{"group": {dim: key}, "case": {dim: key}, "values":
[per-sample score or None], "status": "ok" | "missing"}``. They return plain, JSON-ready dicts;
rendering is the caller's business. Group and case keys are tuples of ``(dim, key)`` pairs
sorted by dimension name (:func:`key_of`), hashable and turned back into a dict with
``dict(key)``. Reducing the cells is the costly part (about 2 µs a cell): :func:`report_groups`
and :func:`compare` also take what :func:`case_scores` returned, so a run that is reported and
compared is reduced once.

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

from fxtr.scores._cases import (
    FLAKY,
    STABLE_FAIL,
    STABLE_PASS,
    CaseScore,
    Key,
    Scores,
    case_scores,
    key_of,
    label,
)
from fxtr.scores._compare import IMPROVED, NO_CHANGE, NOT_COMPARED, REGRESSED, compare
from fxtr.scores._groups import group_statistics, report_groups

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
