"""Gates and baselines: each eval's cells scored per group, compared, and judged.

The statistics are ``fxtr.scores``'s (DESIGN §7, §8); this module gathers the cells the
items reported, finds each eval's baseline (a stored job or a report file), and records the
outcome in the job's record as its ``evaluation`` (``docs/results.md``, "The evaluation
record").
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

LATEST = "latest"


@dataclasses.dataclass
class Baseline:
    """The earlier run an eval is compared with, or why there is none."""

    job_id: str | None
    source: str | None
    """``store`` or ``report``."""
    cells: list[dict[str, Any]] | None
    note: str | None = None
    """Why the eval has no baseline (said in the summary; the run does not fail for it)."""


def find_baseline(store: Any, ref: str, eval_key: str, run_id: str, here: Path) -> Baseline:
    """The baseline of one eval: ``ref`` is a job id, a unique prefix, ``latest`` or a path.

    Raises:
        pytest.UsageError: the job or the file does not exist, a prefix is ambiguous, the
            job or the file has no cells to compare with.
    """
    path = here / ref
    if ref.endswith(".json") or (ref != LATEST and path.is_file()):
        return _from_report(path, ref, eval_key)
    from fxtr.report import resolve_job

    if ref == LATEST:
        return _latest(store, eval_key, run_id)
    try:
        job_id = resolve_job(store, ref)
    except KeyError as exc:
        msg = f"--fxtr-baseline {ref}: {exc.args[0]}"
        raise pytest.UsageError(msg) from None
    evaluation = store.get_job(job_id).get("evaluation")
    if not evaluation or not evaluation.get("cells"):
        msg = (
            f"--fxtr-baseline {ref}: job {job_id} has no evaluation to compare with (it was "
            "not run by pytest as an fxtr eval, or had no numeric scores). Name a job that "
            "`fxtr jobs` lists with an eval."
        )
        raise pytest.UsageError(msg)
    if evaluation.get("eval") != eval_key:
        note = f"baseline job {job_id} is of eval {evaluation.get('eval')}, not this one"
        return Baseline(None, None, None, note=note)
    return Baseline(job_id, "store", evaluation["cells"])


def _latest(store: Any, eval_key: str, run_id: str) -> Baseline:
    """The newest earlier job of the eval whose evaluation is complete (DESIGN §8).

    A job with an invocation left in review, or a group without scores (every case of a
    model awaited review, say), is never ``latest``: comparing with it would pair nothing.
    """
    candidates = []
    for record in store.iter_jobs():
        evaluation = record.get("evaluation") or {}
        if evaluation.get("eval") != eval_key or record["job_id"].startswith(f"{run_id}-"):
            continue
        candidates.append((record.get("created_at") or 0.0, record["job_id"], record))
    passed_over = 0
    for _, job_id, record in sorted(candidates, key=lambda c: (c[0], c[1]), reverse=True):
        if complete_evaluation(store, record):
            return Baseline(job_id, "store", record["evaluation"]["cells"])
        passed_over += 1
    why = f"no earlier job of {eval_key} has a complete evaluation"
    if passed_over:
        why += f" ({passed_over} passed over: a case left in review, or a group without scores)"
    return Baseline(None, None, None, note=why)


def complete_evaluation(store: Any, record: dict[str, Any]) -> bool:
    """Whether a job can be ``latest``: scored in every group, no invocation left in review.

    The invocations are read only for a failed job (its status hides a review under the
    failure); a job that ended ``needs_review`` is passed over from its record alone.
    """
    evaluation = record.get("evaluation") or {}
    groups = evaluation.get("groups") or []
    if not groups or any(g.get("mean") is None for g in groups):
        return False
    attempts = record.get("attempts") or [{}]
    status = attempts[-1].get("status") if isinstance(attempts[-1], dict) else None
    if status == "needs_review":
        return False
    if status == "failed":
        invocations = store.job_invocations(record["job_id"]).values()
        return not any(inv.get("status") == "needs_review" for inv in invocations)
    return True


def _from_report(path: Path, ref: str, eval_key: str) -> Baseline:
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        msg = f"--fxtr-baseline {ref}: no such file {path}; give a --fxtr-report JSON file."
        raise pytest.UsageError(msg) from None
    except (OSError, ValueError) as exc:
        msg = f"--fxtr-baseline {ref}: {path} is not a --fxtr-report JSON file ({exc})."
        raise pytest.UsageError(msg) from None
    jobs = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs, list):
        msg = f'--fxtr-baseline {ref}: {path} has no "jobs" list; give a --fxtr-report file.'
        raise pytest.UsageError(msg)
    for job in jobs:
        if isinstance(job, dict) and job.get("eval") == eval_key and job.get("cells"):
            return Baseline(str(job.get("job_id")), "report", job["cells"])
    return Baseline(None, None, None, note=f"{path.name} has no job of {eval_key}")


def _key(mapping: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(mapping.items()))


def evaluate(payload: dict[str, Any], baseline: Baseline | None, margin: float) -> dict[str, Any]:
    """Score one eval's cells per group, compare them with the baseline, and gate.

    Returns:
        The ``evaluation`` record (``docs/results.md``) plus ``notes``.
    """
    from fxtr import scores

    payload = {**payload, "margin": margin}
    cells = payload["cells"]
    threshold = payload.get("threshold")
    labels = {scores.key_of(case): label for case, label in payload.get("clusters") or []}
    clusters = labels or None
    groups: list[dict[str, Any]] = []
    notes: list[str] = []
    reduced = scores.case_scores(cells) if payload.get("numeric", True) else None
    if reduced is not None:
        for group_key, cases in reduced.items():
            mine = {c: labels[c] for c in cases if c in labels} if labels else None
            stats = dict(scores.group_statistics(cases, threshold=threshold, clusters=mine))
            stats["group"] = dict(group_key)
            groups.append(stats)
    if payload.get("judge"):  # a judged eval: audit figures, corrected scores (DESIGN §15)
        from fxtr.evals._audit import apply_judge

        notes.extend(apply_judge(groups, payload["judge"], threshold))
    for g in groups:
        if g.get("passed") and spans_range(g):
            g["passed"] = False  # nothing was measured: no gate passes on it (DESIGN §15)
    base: dict[str, Any] | None = None
    if baseline is not None and baseline.cells is not None:
        if baseline.job_id == payload.get("job_id"):
            notes.append(f"baseline job {baseline.job_id} is this job; nothing compared")
        else:
            base = {"job_id": baseline.job_id, "source": baseline.source}
            by_group = {_key(g["group"]): g for g in groups}
            compared = scores.compare(  # this run's cells are reduced once, above
                baseline.cells,
                cells if reduced is None else reduced,
                margin=margin,
                threshold=threshold,
                clusters=clusters,
            )
            for comparison in compared:
                comparison = dict(comparison)
                comparison["job_id"] = baseline.job_id
                target = by_group.get(_key(comparison.get("group") or {}))
                if target is not None:
                    target["baseline"] = comparison
    elif baseline is not None and baseline.note:
        notes.append(f"no baseline: {baseline.note}")
    failed = [describe(g["group"]) for g in groups if g.get("passed") is False]
    regressed = [
        describe(g["group"])
        for g in groups
        if (g.get("baseline") or {}).get("verdict") == "regressed"
    ]
    gate = {"passed": not failed and not regressed, "failed": failed, "regressed": regressed}
    return _evaluation(payload, cells, groups, gate, base, threshold, notes)


def spans_range(group: dict[str, Any]) -> bool:
    """Whether the interval the gate used spans the whole range the score can take.

    The interval is the corrected one when the gate used the corrected value (a calibrated
    judge), else the raw one; a group without a known range or an interval spans nothing.
    """
    span = group.get("range")
    used = group.get("corrected") if group.get("gated_on") == "corrected" else group
    if not span or not isinstance(used, dict):
        return False
    low, high = used.get("low"), used.get("high")
    return low is not None and high is not None and low <= span[0] and high >= span[1]


def unscored(payload: dict[str, Any], error: Exception) -> dict[str, Any]:
    """The evaluation of an eval whose cells could not be scored: its gate fails, saying why."""
    problem = f"its scores could not be computed: {type(error).__name__}: {error}"
    gate = {"passed": False, "failed": [problem], "regressed": []}
    return _evaluation(payload, payload["cells"], [], gate, None, payload.get("threshold"), [])


def _evaluation(
    payload: dict[str, Any],
    cells: list[dict[str, Any]],
    groups: list[dict[str, Any]],
    gate: dict[str, Any],
    baseline: dict[str, Any] | None,
    threshold: float | None,
    notes: list[str],
) -> dict[str, Any]:
    """The ``evaluation`` record of one eval (``docs/results.md``) plus ``notes``."""
    return {
        "eval": payload["eval"],
        "workflow": payload["workflow"],
        "case_dims": payload["case_dims"],
        "group_dims": payload["group_dims"],
        "sample_dim": payload["sample_dim"],
        "cells": cells,
        "groups": groups,
        "gate": gate,
        "baseline": baseline,
        "job_id": payload.get("job_id"),
        "threshold": threshold,
        "clusters": payload.get("clusters"),
        "margin": payload.get("margin"),
        "notes": notes,
    }


def describe(group: dict[str, Any]) -> str:
    """A group as the summary names it: ``model=a, judge=b`` (``all cases`` when empty)."""
    return ", ".join(f"{k}={v}" for k, v in group.items()) or "all cases"


RECORD_KEYS = (
    "eval",
    "workflow",
    "case_dims",
    "group_dims",
    "sample_dim",
    "cells",
    "groups",
    "gate",
    "baseline",
    "threshold",
    "clusters",
    "margin",
)
"""The ``evaluation`` fields kept in the job record: what the viewer and ``fxtr`` read, and
what ``fxtr resume`` needs to gate the job again (threshold, cluster labels, margin)."""


def store_evaluation(store: Any, evaluation: dict[str, Any]) -> None:
    """Keep the gate's outcome in the job record (``fxtr jobs`` shows ``gate failed``)."""
    job_id = evaluation.get("job_id")
    if not job_id or not store.has_job(job_id):
        return
    fields = {"evaluation": {k: evaluation.get(k) for k in RECORD_KEYS}}
    update = getattr(store, "update_job", None)
    if update is not None:
        update(job_id, **fields)
        return
    record = store.get_job(job_id)
    record.update(fields)
    store.put_job(record)


def merge_payloads(payloads: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One evaluation payload per eval: the first that carries a job (xdist: every worker)."""
    out: dict[str, dict[str, Any]] = {}
    for p in payloads:
        evaluation = p.get("evaluation")
        if evaluation is None:
            continue
        held = out.get(p["eval"])
        if held is None or (held.get("job_id") is None and evaluation.get("job_id")):
            out[p["eval"]] = evaluation
    return out


def reevaluate(store: Any, job_id: str, result: Any) -> dict[str, Any] | None:
    """Gate a job again after ``fxtr resume``: scores, gate and verdicts of the new attempt.

    The cells come from the resumed attempt's output, the threshold, cluster labels and
    margin from the job's recorded evaluation, and the baseline (when it was a job of this
    store) from that job's record; the new evaluation replaces the old in the record, so
    ``fxtr show``, ``fxtr jobs`` and the viewer never show the failed attempt's scores.

    Returns:
        The new evaluation, or ``None`` when the job was not an eval (nothing recorded).
    """
    from pytest_fxtr._cells import output_cells

    old = store.get_job(job_id).get("evaluation")
    if not isinstance(old, dict) or not isinstance(old.get("cells"), list):
        return None
    payload: dict[str, Any] = {
        "eval": old.get("eval"),
        "workflow": old.get("workflow"),
        "job_id": job_id,
        "threshold": old.get("threshold", _group_threshold(old)),
        "clusters": old.get("clusters"),
    }
    if result.partial_output is not None:
        payload.update(output_cells(result.partial_output, result.missing, result.invocations))
    else:  # nothing came out: every case is missing
        cells = [{**c, "values": [], "status": "missing"} for c in old["cells"]]
        payload.update({k: old.get(k) for k in ("case_dims", "group_dims", "sample_dim")})
        payload.update(cells=cells, numeric=True)
    baseline = None
    recorded = old.get("baseline") or {}
    if recorded.get("source") == "store" and store.has_job(str(recorded.get("job_id"))):
        base = store.get_job(str(recorded["job_id"])).get("evaluation") or {}
        if isinstance(base.get("cells"), list):
            baseline = Baseline(str(recorded["job_id"]), "store", base["cells"])
    elif recorded.get("job_id"):
        where = "a report file" if recorded.get("source") == "report" else "the store"
        note = (
            f"the first attempt's baseline (job {recorded.get('job_id')}, from {where}) is not "
            "in the store, so fxtr resume compared nothing; rerun pytest with --fxtr-baseline"
        )
        baseline = Baseline(None, None, None, note=note)
    margin = old.get("margin")
    try:
        evaluation = evaluate(payload, baseline, float(margin) if margin is not None else 0.0)
    except ValueError as exc:
        evaluation = unscored(payload, exc)
    store_evaluation(store, evaluation)
    return evaluation


def _group_threshold(evaluation: dict[str, Any]) -> float | None:
    """The threshold of a record written before evaluations kept theirs: the groups' own."""
    found = {g.get("threshold") for g in evaluation.get("groups") or [] if isinstance(g, dict)}
    return found.pop() if len(found) == 1 else None
