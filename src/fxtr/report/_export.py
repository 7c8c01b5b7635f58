"""A job as ``--fxtr-report`` writes it, and as ``fxtr export`` writes it from the store.

One function builds the report's entry for a job (:func:`report_entry`), so the two agree:
``fxtr export`` gives exactly that entry, with the evaluation the plugin kept in the job's
record, plus what the store holds beyond the report (:func:`export_entry`): the job's inputs,
each invocation's result, the entities they reference, and the code commit.
"""

from __future__ import annotations

import json
from typing import Any

from fxtr.report._evals import evaluation_of
from fxtr.report._views import JobView, job_report

MAX_ENTITIES = 100_000
"""Entities an export follows from the values it holds (each read once)."""


def report_entry(view: JobView, evaluation: dict[str, Any] | None) -> dict[str, Any]:
    """One job of the ``{"jobs": [...]}`` report.

    Its invocations, cost and scores and, for an eval, its name, gate, baseline and cells.
    """
    entry = job_report(view, evaluation["groups"] if evaluation else [])
    if evaluation is not None:
        entry["eval"] = evaluation["eval"]
        entry["gate"] = evaluation["gate"]
        entry["baseline"] = evaluation["baseline"]
        entry["cells"] = evaluation["cells"]
    return entry


def _tree(text: str | None) -> Any:
    """A canonical value's JSON tree (``None`` for no value or a text that is not JSON)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _refs(tree: Any, out: list[str]) -> None:
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and isinstance(node.get("id"), str):
                out.append(node["id"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def export_entry(view: JobView) -> dict[str, Any]:
    """The report's entry for a job, plus its inputs, results, entities and commit.

    ``inputs`` and each invocation's ``result`` are the canonical value trees the store
    keeps (``{"$array": ...}``, ``{"$entity": ...}``, ``{"$ref": ..., "id": ...}``);
    ``entities`` holds, by id, every entity a ``$ref`` in them names (and theirs in turn).
    """
    entry = report_entry(view, evaluation_of(view.record))
    record = view.record
    entry["commit"] = {"commit": record.get("commit"), "dirty": record.get("dirty")}
    inputs = {name: _tree(text) for name, text in (record.get("inputs") or {}).items()}
    entry["inputs"] = inputs
    results = {
        address: _tree(inv.get("result_text")) for address, inv in sorted(view.invocations.items())
    }
    for inv in entry["invocations"]:
        inv["result"] = results.get(inv["address"])
    entry["entities"] = _entities(view, [inputs, results])
    return entry


def _entities(view: JobView, trees: list[Any]) -> dict[str, Any]:
    store = view.store
    found: dict[str, Any] = {}
    if store is None:
        return found
    wanted: list[str] = []
    for tree in trees:
        _refs(tree, wanted)
    while wanted and len(found) < MAX_ENTITIES:
        entity_id = wanted.pop()
        if entity_id in found:
            continue
        found[entity_id] = tree = _tree(store.get_entity(entity_id))
        _refs(tree, wanted)
    return found
