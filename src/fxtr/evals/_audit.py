# ruff: noqa: RUF002  (the formulas are written in mathematical notation)
"""The judge's audit (DESIGN §15): gold-set accuracy, flips, position bias, corrected scores.

:func:`judge_payload` reads a finished job's judge calls back from its invocations (every
judge step of ``fxtr.evals._judging`` returns a plain JSON dict), so it needs no store and
audits a partial job on what it has. :func:`apply_judge` adds each score group's ``judge``
and ``corrected`` and re-gates the group on the corrected value. Both are called by the
plugin (``pytest_fxtr._cells`` and ``pytest_fxtr._gates``).

Choices made here:

- A gold case's verdict is the majority of its judge samples (0.5 on an even split, 0.5 and
  more counting as a pass, so partial credit passes). ``q0`` is the share of gold negatives
  (label 0) the judge failed, ``q1`` the share of gold positives (label 1) it passed, each
  with its Wilson interval.
- The corrected value is :func:`fxtr.stats.corrected_proportion` of the group's raw mean
  ``p`` with ``n`` = the group's scored cases (with samples, ``p(1 − p)/n`` bounds the
  variance of a mean of per-case fractions from above, so the interval errs wide).
- A judge is usable only when it is clearly better than chance: the Wilson lower bounds of
  ``q0`` and ``q1`` sum to more than 1 (``q0 + q1 > 1`` alone lets a judge right 55% and 50%
  of the time through, whose correction divides by 0.05 and says 1.000 [0, 1]). An unusable
  judge, or a gold set with no negative or no positive case (one of the two rates is
  unknown), leaves its groups gated on their raw mean.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from fxtr.stats import corrected_proportion, proportion_ci

GOLD_STEP = "fxtr.judge_gold"
SAMPLE_STEP = "fxtr.judge"
PAIR_STEP = "fxtr.pairwise"
STEPS = (GOLD_STEP, SAMPLE_STEP, PAIR_STEP)
"""The steps whose results the audit reads (each a judge call's ``{"value", ...}``)."""

_AUDIT_KEYS = ("gold", "judge_sample", "order")


def has_judge_steps(invocations: Iterable[Any]) -> bool:
    """Whether a job graded with a gold set, judge samples or pairs (cheap: step names only)."""
    return any(inv.step in STEPS for inv in invocations)


def judge_payload(invocations: Iterable[Any], group_dims: list[str]) -> dict[str, Any] | None:
    """The judge figures of a job, from its succeeded judge invocations.

    Args:
        invocations: the job's invocation records (``step``, ``status``, ``address``,
            ``result_text``, ``model_calls``).
        group_dims: the eval's group dimensions (the audit's groups are keyed by them).

    Returns:
        ``{"judges": [model names], "gold": {...} | None, "groups": [{"group", "answers",
        "flipped", "pairs", "inconsistent"}]}``, or ``None`` when the job has no judge step.
    """
    from fxtr.tracing._jobgraph import address_segments, split_segment

    gold: dict[str, dict[str, Any]] = {}
    answers: dict[str, dict[tuple[Any, ...], list[float]]] = {}
    pairs: dict[str, dict[tuple[Any, ...], dict[str, list[float]]]] = {}
    groups: dict[str, dict[str, str]] = {}
    judges: set[str] = set()
    seen = False
    for inv in invocations:
        if inv.step not in STEPS:
            continue
        seen = True
        if inv.status != "succeeded" or not inv.result_text:
            continue
        try:
            result = json.loads(inv.result_text)
            value = float(result["value"])
        except (ValueError, TypeError, KeyError):
            continue  # a damaged record is a missing verdict, never a wrong one
        keys: dict[str, str] = {}
        for segment in address_segments(inv.address):
            keys.update(split_segment(segment)[1])
        for call in getattr(inv, "model_calls", None) or []:
            if isinstance(call, dict) and call.get("model"):
                judges.add(str(call["model"]))
        if inv.step == GOLD_STEP:
            entry = gold.setdefault(keys.get("gold", ""), {"label": result.get("label"), "v": []})
            entry["v"].append(value)
            continue
        group = {d: keys[d] for d in group_dims if d in keys}
        name = json.dumps(group, sort_keys=True)
        groups[name] = group
        answer = tuple(v for k, v in sorted(keys.items()) if k not in (*group_dims, *_AUDIT_KEYS))
        if inv.step == SAMPLE_STEP:
            answers.setdefault(name, {}).setdefault(answer, []).append(value)
        else:
            order = keys.get("order", "")
            pairs.setdefault(name, {}).setdefault(answer, {}).setdefault(order, []).append(value)
    if not seen:
        return None
    from fxtr.evals._judging import majority, mode

    out_groups = []
    for name, group in groups.items():
        graded = answers.get(name, {})
        several = [v for v in graded.values() if len(v) > 1]
        paired = [o for o in (pairs.get(name) or {}).values() if len(o) == 2]
        flipped = sum(len(set(v)) > 1 for v in several)
        flipped += sum(any(len(set(v)) > 1 for v in o.values()) for o in paired)
        sampled = len(several) + sum(any(len(v) > 1 for v in o.values()) for o in paired)
        inconsistent = sum(mode(o["AB"]) != mode(o["BA"]) for o in paired if "AB" in o)
        out_groups.append(
            {
                "group": group,
                "answers": sampled,
                "flipped": flipped,
                "pairs": len(paired),
                "inconsistent": inconsistent,
            }
        )
    return {"judges": sorted(judges), "gold": _gold(gold, majority), "groups": out_groups}


def _gold(gold: dict[str, dict[str, Any]], majority: Any) -> dict[str, Any] | None:
    if not gold:
        return None
    counts = dict.fromkeys(("negatives", "failed_negatives", "positives", "passed_positives"), 0)
    wrong, flipped = [], 0
    for gold_id, entry in sorted(gold.items()):
        passed = majority(entry["v"]) >= 0.5
        flipped += len(set(entry["v"])) > 1
        if entry["label"] == 1:
            counts["positives"] += 1
            counts["passed_positives"] += passed
        else:
            counts["negatives"] += 1
            counts["failed_negatives"] += not passed
        if passed != (entry["label"] == 1):
            wrong.append(gold_id)
    return {**counts, "graded": len(gold), "flipped": flipped, "wrong": wrong}


def _rate(k: int, n: int) -> dict[str, Any] | None:
    if n < 1:
        return None
    est = proportion_ci(k, n)
    return {"value": est.value, "low": est.low, "high": est.high, "n": n}


def judge_figures(audit: Mapping[str, Any], group: Mapping[str, Any]) -> dict[str, Any]:
    """A group's ``judge`` figures, each ``None`` when not measured.

    ``q0``, ``q1`` (Wilson), ``usable``, ``flip_rate``, ``position_inconsistency``, the judge
    models, and with a gold set its size, its own flip rate and the gold cases graded wrong.
    """
    gold = audit.get("gold")
    mine = next((g for g in audit.get("groups") or [] if g["group"] == dict(group)), None)
    q0 = _rate(gold["failed_negatives"], gold["negatives"]) if gold else None
    q1 = _rate(gold["passed_positives"], gold["positives"]) if gold else None
    usable = None if gold is None else bool(q0 and q1 and q0["low"] + q1["low"] > 1)
    out: dict[str, Any] = {
        "q0": q0,
        "q1": q1,
        "usable": usable,
        "flip_rate": mine["flipped"] / mine["answers"] if mine and mine["answers"] else None,
        "position_inconsistency": (
            mine["inconsistent"] / mine["pairs"] if mine and mine["pairs"] else None
        ),
        "judges": list(audit.get("judges") or []),
    }
    if gold:
        out["gold"] = gold["graded"]
        out["gold_flip_rate"] = gold["flipped"] / gold["graded"] if gold["graded"] else None
        out["wrong"] = list(gold["wrong"])
    return out


def apply_judge(
    groups: list[dict[str, Any]], audit: Mapping[str, Any], threshold: float | None
) -> list[str]:
    """Give each score group its ``judge`` and ``corrected``, and gate on the corrected value.

    A group with a usable gold set gets ``corrected: {value, stderr, low, high}`` and passes
    when that value reaches the threshold (and no case is missing); an unusable judge leaves
    the raw gate and is named in the returned notes. ``gated_on`` says which value the gate
    used (``corrected`` or ``raw``).

    Returns:
        Notes for the summary (the unusable judge, a gold set without negatives or positives).
    """
    from fxtr.scores._cases import _passed

    notes: list[str] = []
    for g in groups:
        figures = judge_figures(audit, g["group"])
        g["judge"] = figures
        if figures["usable"] is None:
            continue
        g["corrected"] = None
        g["gated_on"] = "raw"
        mean = g.get("mean")
        if not figures["usable"] or mean is None or g.get("range") != [0.0, 1.0]:
            continue
        q0, q1 = figures["q0"], figures["q1"]
        est = corrected_proportion(
            min(1.0, max(0.0, mean)), max(1, int(g["n"])),
            q0=q0["value"], m0=q0["n"], q1=q1["value"], m1=q1["n"],
        )
        g["corrected"] = {"value": est.value, "stderr": est.stderr, "low": est.low,
                          "high": est.high}
        g["gated_on"] = "corrected"
        g["passed"] = _passed(est.value, threshold, g.get("missing", 0) + g.get("incomplete", 0))
    first = groups[0]["judge"] if groups else None
    if first is not None and first["usable"] is False:
        notes.append(unusable_note(first))
    return notes


def unusable_note(figures: Mapping[str, Any]) -> str:
    """Why a judge's scores are not corrected, and what the gate used instead."""
    who = ", ".join(figures.get("judges") or []) or "the judge"
    q0, q1 = figures.get("q0"), figures.get("q1")
    if q0 is None or q1 is None:
        lacking = "negative (label 0)" if q0 is None else "positive (label 1)"
        return f"judge {who}: no {lacking} gold case, not corrected: gated on the raw mean"
    return (
        f"judge {who} is unusable: not clearly better than chance (the Wilson lower bounds of "
        f"q0 {q0['value']:.3f} and q1 {q1['value']:.3f} sum to {q0['low'] + q1['low']:.3f}, "
        f"not above 1, on {figures.get('gold')} gold cases): gated on the raw mean; a better "
        "judge or more gold cases can make it usable"
    )
