# ruff: noqa: RUF002  (the formulas are written in mathematical notation)
"""``fxtr calibrate JOB``: the A/A control from samples already paid for (DESIGN §15).

Each case's samples are split at random into two halves of equal size (a seeded shuffle per
split and case; with an odd count the one left over sits out that split), the halves'
per-case means are compared with section 8's paired comparison
(:func:`fxtr.stats.paired_difference` and its verdict rule: ``regressed`` when the whole
interval lies below 0, ``improved`` when above), and the share of splits that do not say
``no significant change`` is the gate's false-flip rate: both halves come from one
distribution, so an honest gate keeps it near α = 1 − confidence.

The variance parts, over the cases with at least two samples (x̄ᵢ the mean of case i's Kᵢ
samples, sᵢ² their sample variance)::

    between = Var(x̄ᵢ) across cases (n − 1 denominator)
    within  = mean of sᵢ² (the mean within-case variance σ²)
    ratio   = between / within

and the minimum detectable effect of comparing two runs of this eval at its n cases and K
samples (the median Kᵢ): Miller's eq. 10 with the SD of a case's difference between two
reruns, ``√(2σ²/K)`` (the cases' own difficulty cancels in a pair; only sampling noise is
left).
"""

from __future__ import annotations

import argparse
import functools
import math
import random
import statistics
from typing import Any

from fxtr.stats import minimum_detectable_effect, paired_difference

DEFAULT_SPLITS = 200
NO_CHANGE = "no significant change"


def add_parser(sub: Any, common: argparse.ArgumentParser, helpers: tuple[Any, ...]) -> None:
    """Register ``fxtr calibrate`` on the ``fxtr`` command's subparsers.

    ``helpers`` are the command's ``(open the store, resolve a job, print JSON, error
    class)``, given so that this module needs not import ``fxtr.cli``.
    """
    p = sub.add_parser(
        "calibrate",
        parents=[common],
        help="the A/A control: the gate's false-flip rate from a job's samples",
        description="Split each case's samples into two seeded random halves --splits times, "
        "compare the halves as --fxtr-baseline compares runs, and print per group the share "
        "of splits that did not say 'no significant change' (the false-flip rate: near "
        "alpha for an honest gate), the variance between and within cases, and the minimum "
        "detectable effect at the eval's n. JOB is a job id, a unique prefix or 'latest' "
        "of an eval run with samples >= 2.",
    )
    p.add_argument("job", metavar="JOB", help="the eval job (samples >= 2)")
    p.add_argument(
        "--splits", type=int, default=DEFAULT_SPLITS,
        help=f"random half-splits per group (default {DEFAULT_SPLITS})",
    )
    p.add_argument("--seed", type=int, default=0, help="the splits' seed (default 0)")
    p.add_argument(
        "--alpha", type=float, default=0.05,
        help="the comparison's significance level: intervals at 1 - alpha (default 0.05)",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(run=functools.partial(run, helpers=helpers))


def check_options(args: argparse.Namespace) -> None:
    """``--splits`` and ``--alpha`` in range.

    Raises:
        ValueError: naming the option and the fix.
    """
    if args.splits < 1:
        msg = f"--splits {args.splits} must be at least 1 (200 is the default)."
        raise ValueError(msg)
    if not 0 < args.alpha < 1:
        msg = f"--alpha {args.alpha} must lie strictly between 0 and 1 (e.g. 0.05)."
        raise ValueError(msg)


def run(args: argparse.Namespace, *, helpers: tuple[Any, ...]) -> int:
    """Run ``fxtr calibrate`` with the command's helpers (see :func:`add_parser`).

    Raises:
        Exception: the command's error for bad options, a job that is no eval or has too few
            samples (the ``fxtr`` command prints it and exits 1).
    """
    open_store, job_id_of, print_json, error = helpers
    try:
        check_options(args)
        store = open_store(args)
        job_id = job_id_of(store, args.job)
        document, lines = calibrate(args, job_id, store.get_job(job_id))
    except ValueError as exc:
        raise error(str(exc)) from None
    if document is not None:
        print_json(document)
    else:
        print("\n".join(lines))
    return 0


def calibrate(
    args: argparse.Namespace, job_id: str, record: dict[str, Any]
) -> tuple[dict[str, Any] | None, list[str]]:
    """``fxtr calibrate``'s output for one job record: the JSON document or the lines.

    Returns:
        ``(document, [])`` with ``--json``, else ``(None, lines)``.

    Raises:
        ValueError: the job is no eval, or has too few samples (the message says the fix).
    """
    from fxtr.report._evals import evaluation_of

    evaluation = evaluation_of(record)
    if evaluation is None:
        msg = (
            f"job {job_id} has no evaluation (only jobs of fxtr-marked pytest evals record "
            "one). `fxtr jobs` shows which jobs are evals."
        )
        raise ValueError(msg)
    try:
        groups = aa_control(evaluation, splits=args.splits, seed=args.seed, alpha=args.alpha)
    except ValueError as exc:
        msg = f"job {job_id}: {exc}"
        raise ValueError(msg) from None
    if args.json:
        document = {"job_id": job_id, "eval": evaluation.get("eval"), "splits": args.splits,
                    "seed": args.seed, "alpha": args.alpha, "groups": groups}
        return document, []
    return None, calibration_lines(job_id, evaluation, groups, args.alpha)


def aa_control(
    evaluation: dict[str, Any], *, splits: int = DEFAULT_SPLITS, seed: int = 0,
    alpha: float = 0.05,
) -> list[dict[str, Any]]:
    """The A/A control of an evaluation, per group (see the module docstring).

    Args:
        evaluation: a job record's ``evaluation`` (its ``cells``: per case and group the
            per-sample scores).
        splits: how many random half-splits per group.
        seed: the splits' seed (the same seed gives the same figures).
        alpha: the comparison's significance level (intervals at 1 − alpha).

    Returns:
        Per group: ``{"group", "cases", "samples", "splits", "false_flips",
        "false_flip_rate", "regressed", "improved", "alpha", "variance": {"between",
        "within", "ratio"}, "mde"}`` (``ratio`` ``None`` when within is 0).

    Raises:
        ValueError: no group has two cases with at least two scored samples each.
    """
    by_group: dict[str, tuple[dict[str, Any], list[tuple[str, list[float]]]]] = {}
    for cell in evaluation.get("cells") or []:
        if not isinstance(cell, dict) or cell.get("status") == "missing":
            continue
        values = [float(v) for v in cell.get("values") or [] if v is not None]
        if len(values) < 2:
            continue
        group = dict(cell.get("group") or {})
        key = repr(sorted(group.items()))
        case = repr(sorted((cell.get("case") or {}).items()))
        by_group.setdefault(key, (group, []))[1].append((case, values))
    usable = {k: v for k, v in by_group.items() if len(v[1]) >= 2}
    if not usable:
        most = max(
            (len(c.get("values") or []) for c in evaluation.get("cells") or []
             if isinstance(c, dict)),
            default=0,
        )
        msg = (
            f"its eval has {most} sample(s) per case and the A/A control needs at least 2 "
            "scored samples in each of at least 2 cases (it splits each case's samples into "
            "two halves): rerun the eval with samples >= 2 (`samples` in the marker's "
            "inputs, or --fxtr-samples 4)"
        )
        raise ValueError(msg)
    out = []
    for group, cases in usable.values():
        out.append(_group_control(group, cases, splits, seed, alpha))
    return out


def _group_control(
    group: dict[str, Any], cases: list[tuple[str, list[float]]], splits: int, seed: int,
    alpha: float,
) -> dict[str, Any]:
    rng = random.Random(f"fxtr-calibrate/{seed}/{sorted(group.items())!r}")
    regressed = improved = 0
    confidence = 1 - alpha
    for _ in range(splits):
        a, b = [], []
        for _, values in cases:
            order = list(range(len(values)))
            rng.shuffle(order)
            half = len(values) // 2
            a.append(math.fsum(values[i] for i in order[:half]) / half)
            b.append(math.fsum(values[i] for i in order[half : 2 * half]) / half)
        est = paired_difference(b, a, confidence=confidence)
        if est.high is not None and est.high < 0:
            regressed += 1
        elif est.low is not None and est.low > 0:
            improved += 1
    means = [math.fsum(v) / len(v) for _, v in cases]
    within = statistics.fmean(statistics.variance(v) for _, v in cases)
    between = statistics.variance(means)
    median = statistics.median(len(v) for _, v in cases)
    k = int(median) if median == int(median) else median
    # no within-case variance (a deterministic model): reruns agree, any change shows: 0
    mde = minimum_detectable_effect(len(cases), math.sqrt(2 * within / k), alpha=alpha)
    return {
        "group": group,
        "cases": len(cases),
        "samples": k,
        "splits": splits,
        "false_flips": regressed + improved,
        "false_flip_rate": (regressed + improved) / splits,
        "regressed": regressed,
        "improved": improved,
        "alpha": alpha,
        "variance": {
            "between": between,
            "within": within,
            "ratio": between / within if within > 0 else None,
        },
        "mde": mde,
    }


def calibration_lines(
    job_id: str, evaluation: dict[str, Any], groups: list[dict[str, Any]], alpha: float
) -> list[str]:
    """What ``fxtr calibrate`` prints: a table per group and how to read it."""
    from tabulate import tabulate

    from fxtr.report._evals import format_score, key_label

    def num(value: Any) -> str:
        return "-" if value is None else f"{value:.3f}"

    rows = [
        [
            key_label(g["group"]),
            g["cases"],
            format_score(g["samples"]),
            f"{g['false_flips']}/{g['splits']}",
            num(g["false_flip_rate"]),
            num(g["variance"]["between"]),
            num(g["variance"]["within"]),
            num(g["variance"]["ratio"]),
            num(g["mde"]),
        ]
        for g in groups
    ]
    headers = ["group", "cases", "K", "false flips", "rate", "Var(x̄)", "mean σ²", "ratio", "MDE"]
    lines = [
        f"A/A control of job {job_id} ({evaluation.get('eval')}): each case's samples split "
        f"in two random halves, compared as a baseline is (alpha {alpha:g})",
        "",
        tabulate(rows, headers=headers, disable_numparse=True),
        "",
        f"rate: share of splits whose verdict was not '{NO_CHANGE}' (an honest gate: near "
        f"{alpha:g}); Var(x̄): variance of the case means; mean σ²: mean within-case variance; "
        "MDE: smallest difference a rerun comparison detects at 80% power",
    ]
    for g in groups:
        if g["false_flip_rate"] > 2 * alpha and g["splits"] >= 50:
            lines.append(
                f"note ({key_label(g['group'])}): the false-flip rate is over twice alpha: "
                "the gate flags changes that are noise (few cases, or samples that are not "
                "independent draws)"
            )
    return lines
