"""An eval's outcome as cells: what the gate, the summary, the report and baselines read.

``evaluation_payload`` turns a finished job's output (or, when the job stopped, what it
computed) into the ``cells`` of the job record's ``evaluation``: one cell per group and case,
with its per-sample values and addresses. ``cluster_labels`` reads the marker's ``cluster=``
field; ``item_properties`` is what each item tells the controller. Called by the plugin's
hooks; uses ``_evals`` (the eval, its items' keys, address parsing), never the other way.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from pytest_fxtr._evals import Eval, address_keys, item_keys, numeric

CASE = "case"
SAMPLE = "sample"


def evaluation_payload(ev: Eval, fail_under: float | None) -> dict[str, Any]:
    """The eval's cells (``docs/results.md``), built from its job once per process.

    Each cell is one case of one group: its per-sample numeric values (``None`` where a
    sample has no value), ``ok`` or ``missing``, and the addresses of the invocations
    behind it. Cells come from the whole job, not from the items that ran (``-x``).
    """
    job = ev.job
    threshold = ev.threshold if ev.threshold is not None else fail_under
    payload: dict[str, Any] = {
        "eval": ev.nodeid,
        "workflow": ev.workflow.name,
        "job_id": ev.job_id,
        "threshold": threshold,
        "cluster": ev.cluster,
        "clusters": ev.clusters,
    }
    if job is None or job.partial_output is None:
        dims = [CASE] if CASE in ev.dims else []
        group_dims = [d for d in ev.dims if d not in (CASE, SAMPLE)]
        cells: dict[str, dict[str, Any]] = {}
        for item in ev.items:
            keys = item_keys(ev, item)
            cell = _cell({d: keys[d] for d in group_dims}, {d: keys[d] for d in dims})
            cell["status"] = "missing"
            cells.setdefault(json.dumps([cell["group"], cell["case"]]), cell)
        payload.update(
            case_dims=dims, group_dims=group_dims, sample_dim=None, cells=list(cells.values())
        )
        payload["numeric"] = True
        return payload
    payload.update(output_cells(job.partial_output, job.missing, job.invocations))
    return payload


def output_cells(partial: Any, missing: Any, invocations: list[Any]) -> dict[str, Any]:
    """The cells of a job's output, with its dims and whether the scores are numbers.

    Read from the job's (partial) output Array, the keys missing from it and its
    invocations; the plugin's payload and ``fxtr resume``'s new evaluation share it.

    Returns:
        ``{"case_dims", "group_dims", "sample_dim", "cells", "numeric"}``, and ``judge`` (the
        judge's audit, ``fxtr.evals._audit``) when the job graded with a gold set, judge
        samples or pairs.
    """
    out_dims = list(partial.dims)
    case_dims = [d for d in out_dims if d == CASE]
    group_dims = [d for d in out_dims if d not in (CASE, SAMPLE)]
    sample = SAMPLE if SAMPLE in out_dims else None
    positions = [out_dims.index(d) for d in group_dims + case_dims]
    n_group = len(group_dims)
    by_cell: dict[tuple[Any, ...], dict[str, Any]] = {}
    any_numeric = any_value = False
    for key, value in partial.items():
        ident = tuple(_text(key[i]) for i in positions)
        if ident in by_cell:
            cell = by_cell[ident]
        else:
            group = dict(zip(group_dims, ident[:n_group], strict=True))
            cell = by_cell[ident] = _cell(group, dict(zip(case_dims, ident[n_group:], strict=True)))
        gone = key in missing if missing else False
        number = None if gone else numeric(value)
        if number is None:
            cell["status"] = "missing"
            if not gone and value is not None:
                cell["non_numeric"] = cell.get("non_numeric", 0) + 1
        else:
            any_numeric = True
        any_value = any_value or not gone
        cell["values"].append(number)
    # a judge's gold cases belong to no cell (they carry none of the cells' keys)
    graded = [inv for inv in invocations if inv.step != "fxtr.judge_gold"]
    _attach_addresses(by_cell, graded, group_dims, case_dims)
    out = {
        "case_dims": case_dims,
        "group_dims": group_dims,
        "sample_dim": sample,
        "cells": list(by_cell.values()),
        "numeric": any_numeric or not any_value,
    }
    _attach_judge(out, invocations, group_dims)
    return out


def _attach_judge(payload: dict[str, Any], invocations: list[Any], group_dims: list[str]) -> None:
    """The judge's audit (gold set, flips, pairs: DESIGN §15) when the job graded with one."""
    from fxtr.evals._audit import has_judge_steps, judge_payload

    if has_judge_steps(invocations):
        payload["judge"] = judge_payload(invocations, group_dims)


def _cell(group: dict[str, str], case: dict[str, str]) -> dict[str, Any]:
    return {"group": group, "case": case, "values": [], "status": "ok", "addresses": []}


def _text(key: Any) -> str:
    return key if type(key) is str else str(key)


def _attach_addresses(
    cells: dict[tuple[Any, ...], dict[str, Any]],
    invocations: list[Any],
    group_dims: list[str],
    case_dims: list[str],
) -> None:
    """Each cell's addresses: the invocations whose map keys agree with the cell's."""
    dims = group_dims + case_dims
    for inv in invocations:
        keys = address_keys(inv.address)
        if all(d in keys for d in dims):
            cell = cells.get(tuple(keys[d] for d in dims))
            targets = [cell] if cell is not None else []
        else:
            targets = [
                c
                for c in cells.values()
                if all(keys.get(d, v) == v for d, v in {**c["group"], **c["case"]}.items())
            ]
        for cell in targets:
            cell["addresses"].append(inv.address)
    for cell in cells.values():
        cell["addresses"].sort()


def cluster_labels(ev: Eval) -> list[list[Any]]:
    """``[[case key, label], ...]`` for ``cluster=FIELD``: one label per case.

    FIELD is a parametrized argument's name, or a field of the case's values: a key of
    their ``metadata`` mapping (a kit ``Case``), a key of a mapping, or an attribute.

    Raises:
        pytest.UsageError: a case has no such field.
    """
    assert ev.cluster is not None
    field = ev.cluster
    labels: dict[str, Any] = {}
    for item in ev.items:
        keys = item_keys(ev, item)
        case = {CASE: keys[CASE]} if CASE in keys else {}
        params = item.callspec.params  # type: ignore[attr-defined]
        found, label = _field(params, ev.dims.get(CASE, ()), field)
        if not found:
            msg = (
                f"@pytest.mark.fxtr on {ev.nodeid}: cluster={field!r}, but case "
                f"{keys.get(CASE)!r} has no field {field!r} (not a parametrized argument, "
                "nor a key of its values' metadata, nor an attribute of them); name a field "
                "every case has."
            )
            raise pytest.UsageError(msg)
        labels[json.dumps(case, sort_keys=True)] = label if isinstance(label, str) else str(label)
    return [[json.loads(case), label] for case, label in labels.items()]


def _field(params: dict[str, Any], names: tuple[str, ...], field: str) -> tuple[bool, Any]:
    if field in params:
        return True, params[field]
    for name in names:
        value = params.get(name)
        metadata = getattr(value, "metadata", None)
        if isinstance(metadata, dict) and field in metadata:
            return True, metadata[field]
        if isinstance(value, dict) and field in value:
            return True, value[field]
        if hasattr(value, field) and not callable(getattr(value, field)):
            return True, getattr(value, field)
    return False, None


def item_payload(ev: Eval, fail_under: float | None) -> dict[str, Any] | None:
    """What the controller needs to gate and summarize an eval, once per eval and process.

    The first item of an eval in each process carries the eval's job id and cells (the
    controller keeps one copy per eval); later items carry nothing, so a 10,000-item eval
    builds and parses no per-item payload.
    """
    if ev.reported:
        return None
    ev.reported = True
    return {
        "eval": ev.nodeid,
        "job_id": ev.job_id,
        "at": time.time(),
        "evaluation": evaluation_payload(ev, fail_under),
    }


def attach_outcomes(payload: dict[str, Any], outcomes: list[dict[str, Any]]) -> None:
    """Give each cell its items' pytest outcome (``passed``, ``failed``, ``skipped``).

    A cell whose results are not scores says what the test judged of them; a cell several
    items feed is ``failed`` when one failed. Matched by the cell's keys, once per item.
    """
    dims = [*(payload.get("group_dims") or []), *(payload.get("case_dims") or [])]
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    by_key: dict[tuple[Any, ...], str] = {}
    for record in outcomes:
        keys, outcome = record.get("keys") or {}, str(record.get("outcome"))
        key = tuple(keys.get(d) for d in dims)
        held = by_key.get(key)
        if held is None or rank.get(outcome, 0) > rank.get(held, 0):
            by_key[key] = outcome
    for cell in payload.get("cells") or []:
        keys = {**(cell.get("group") or {}), **(cell.get("case") or {})}
        found = by_key.get(tuple(keys.get(d) for d in dims))
        if found is not None:
            cell["outcome"] = found


def note_outcome(state: Any, item: pytest.Item, report: pytest.TestReport) -> None:
    """Keep an eval item's outcome (its call's, or its setup's when it failed).

    For ``attach_outcomes``: in ``state.outcomes``, or (an xdist worker) as a property of
    the teardown report, which carries it to the controller.
    """
    if report.when == "teardown" or (report.when == "setup" and report.passed):
        return
    ev = state.evals.get(item.nodeid.split("[", 1)[0])
    if ev is None:
        return
    try:
        keys = item_keys(ev, item)
    except pytest.UsageError:
        return
    record = {"eval": ev.nodeid, "keys": keys, "outcome": report.outcome}
    if state.worker:
        item.user_properties.append(("fxtr-outcome", json.dumps(record)))
    else:
        state.outcomes.append(record)
