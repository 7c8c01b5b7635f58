"""Eval results read back from a job record's ``evaluation`` field: matrix, cells, comparisons.

The plugin writes ``evaluation`` after gating (``docs/results.md``, "The evaluation record"):
one cell per case and group with the per-sample scores. Everything here reads that field
alone, so the results of a 10,000-case job are shown without loading its invocations.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from fxtr.report._values import render_tree, render_value
from fxtr.scores import case_scores, compare
from fxtr.store import Store

MATRIX_PAGE = 100
"""Rows (cases) per page of the results matrix."""
FILTERS = ("failed", "flaky", "missing", "changed")
"""The cell filters: a row is shown when one of its cells matches."""


def evaluation_of(record: dict[str, Any]) -> dict[str, Any] | None:
    """The ``evaluation`` field of a job record, when the job was an eval."""
    evaluation = record.get("evaluation")
    if isinstance(evaluation, dict) and isinstance(evaluation.get("cells"), list):
        return evaluation
    return None


def key_label(key: dict[str, Any]) -> str:
    """A case or group key as text: the value alone for one dimension, ``dim=value`` pairs else."""
    if not key:
        return "all"
    if len(key) == 1:
        return str(next(iter(key.values())))
    return ", ".join(f"{dim}={value}" for dim, value in key.items())


def _frozen(key: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(key.items()))  # fxtr.scores.key_of, inlined: 20,000 cells a page


def format_score(value: float | None) -> str:
    """A score, mean, bound, threshold or MDE as every view prints it: three decimals.

    The one formatter of figures (DESIGN §11): the summary, ``fxtr show``, ``fxtr compare``,
    the Markdown and the viewer (``num`` in ``app.js`` mirrors it) all print ``0.750``;
    ``-`` when there is no value.
    """
    if value is None or not isinstance(value, int | float) or math.isnan(value):
        return "-"
    text = f"{value:.3f}"
    return text[1:] if text == "-0.000" else text


def format_signed(value: float | None) -> str:
    """A difference with its sign: ``+0.125``, ``-0.700``, ``0.000``."""
    text = format_score(value)
    return "+" + text if text not in ("-", "0.000") and not text.startswith("-") else text


def format_interval(low: float | None, high: float | None) -> str:
    """An interval as every view prints it: ``[0.301, 0.954]``; ``-`` without one."""
    if format_score(low) == "-" or format_score(high) == "-":
        return "-"
    return f"[{format_score(low)}, {format_score(high)}]"


def pass_bar(threshold: float | None, unit: bool) -> float | None:
    """The score a case needs to pass: the gate's threshold, else 0.5 for a score in [0, 1].

    The same bar ``fxtr.scores.compare`` flips cases on; an unbounded score without a
    threshold has none (no case counts as failed).
    """
    if threshold is not None:
        return float(threshold)
    return 0.5 if unit else None


def cell_score(score: Any, *, bar: float | None, sampled: bool) -> dict[str, Any]:
    """What one matrix cell shows, from its ``fxtr.scores.CaseScore``."""
    value = score.value
    out: dict[str, Any] = {
        "score": value,
        "samples": score.samples,
        "recorded": score.n,
        "missing": value is None or score.n < score.samples,
        "k": score.k,
        "n": score.n if score.binary else None,
        "verdict": score.verdict,
    }
    if value is None:
        out["text"] = "missing"
    elif score.binary and (sampled or score.samples > 1):
        out["text"] = f"{score.k}/{score.n}"
    else:
        out["text"] = format_score(value)
    if value is not None and score.n < score.samples:
        out["text"] += f" · {score.samples - score.n} missing"
    out["failed"] = value is not None and bar is not None and value < bar - 1e-12
    out["flaky"] = score.verdict == "flaky"
    return out


UNSCORED = "no score"
"""What a cell of an eval without numeric scores shows when its steps gave a result: the
result is recorded (the item judged it), so it is not ``missing``."""


def unscored(cell: dict[str, Any]) -> bool:
    """Whether a cell's every sample has a result that is not a number (nothing missing)."""
    values = cell.get("values") or []
    return bool(values) and int(cell.get("non_numeric") or 0) >= len(values)


def _thresholds(evaluation: dict[str, Any]) -> dict[tuple[tuple[str, Any], ...], float | None]:
    out: dict[tuple[tuple[str, Any], ...], float | None] = {}
    for group in evaluation.get("groups") or []:
        if isinstance(group, dict) and isinstance(group.get("group"), dict):
            out[_frozen(group["group"])] = group.get("threshold")
    return out


def cell_table(evaluation: dict[str, Any]) -> dict[str, Any]:
    """Columns (group keys), rows (case keys) and the scored cells of an evaluation.

    Raises:
        ValueError: the cells are not scores (as ``fxtr.scores.case_scores`` says).
    """
    cells = [c for c in evaluation.get("cells") or [] if isinstance(c, dict)]
    try:
        scores = case_scores(cells)
    except (KeyError, TypeError) as exc:
        msg = f"The job's evaluation cells are damaged: {type(exc).__name__}: {exc}."
        raise ValueError(msg) from None
    sampled = bool(evaluation.get("sample_dim"))
    thresholds = _thresholds(evaluation)
    columns: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
    rows: dict[tuple[tuple[str, Any], ...], dict[str, Any]] = {}
    scored: dict[tuple[Any, Any], dict[str, Any]] = {}
    binary = False
    for index, cell in enumerate(cells):
        group, case = cell.get("group") or {}, cell.get("case") or {}
        gkey, ckey = _frozen(group), _frozen(case)
        if gkey not in columns:
            columns[gkey] = {"group": group, "label": key_label(group)}
        if ckey not in rows:
            rows[ckey] = {"case": case, "label": key_label(case)}
        score = scores[gkey][ckey]
        binary = score.binary
        bar = pass_bar(thresholds.get(gkey), score.unit)
        view = cell_score(score, bar=bar, sampled=sampled)
        if score.value is None and unscored(cell):
            outcome = cell.get("outcome")  # what the test judged of the result
            text = f"{UNSCORED} · {outcome}" if outcome else UNSCORED
            view.update(missing=False, unscored=True, text=text, outcome=outcome)
            view["failed"] = outcome == "failed"
        scored[(ckey, gkey)] = {**view, "index": index}
    return {"columns": columns, "rows": rows, "cells": scored, "binary": binary}


def _changed(mine: dict[str, Any] | None, theirs: dict[str, Any] | None) -> bool:
    if mine is None or theirs is None:
        return (mine is None) != (theirs is None)
    if mine["missing"] or theirs["missing"]:
        return bool(mine["missing"]) != bool(theirs["missing"])
    a, b = mine["score"], theirs["score"]
    return a is not None and b is not None and abs(a - b) > 1e-12


def result_matrix(
    evaluation: dict[str, Any],
    *,
    baseline: dict[str, Any] | None = None,
    tables: tuple[dict[str, Any], dict[str, Any] | None] | None = None,
    show: str | None = None,
    query: str | None = None,
    offset: int = 0,
    limit: int = MATRIX_PAGE,
) -> dict[str, Any]:
    """One page of the results matrix: cases (rows) by the values of the group dims (columns).

    Args:
        evaluation: the job's ``evaluation`` field.
        baseline: another job's ``evaluation``; cells whose score differs are ``changed``.
        show: one of ``FILTERS``: only rows with a cell that matches.
        query: only rows whose case label contains this text (case-insensitive).
        offset: the first row of the page.
        limit: rows per page.
        tables: the ``cell_table`` of the evaluation and of the baseline, when already made.

    Raises:
        ValueError: an unknown filter, or ``changed`` without a baseline.
    """
    if show is not None and show not in FILTERS:
        msg = f"Unknown filter {show!r}; valid filters: {', '.join(FILTERS)}."
        raise ValueError(msg)
    if show == "changed" and baseline is None:
        msg = "The 'changed' filter needs a comparison: open the job with ?compare=JOB."
        raise ValueError(msg)
    if tables is None:
        tables = (cell_table(evaluation), cell_table(baseline) if baseline is not None else None)
    table, other = tables
    columns = list(table["columns"])
    counts = dict.fromkeys(FILTERS, 0)
    shown: list[dict[str, Any]] = []
    needle = (query or "").lower()
    for ckey, row in table["rows"].items():
        cells: list[dict[str, Any] | None] = []
        flags: set[str] = set()
        for gkey in columns:
            cell = table["cells"].get((ckey, gkey))
            if cell is not None:
                cell = dict(cell)
                if other is not None:
                    before = other["cells"].get((ckey, gkey))
                    cell["baseline"] = before["text"] if before else None
                    cell["changed"] = _changed(cell, before)
                for flag in FILTERS:
                    if cell.get(flag):
                        flags.add(flag)
            cells.append(cell)
        for flag in flags:
            counts[flag] += 1
        if show and show not in flags:
            continue
        if needle and needle not in row["label"].lower():
            continue
        shown.append({**row, "cells": cells})
    groups = {_frozen(g["group"]): g for g in evaluation.get("groups") or [] if "group" in g}
    return {
        "columns": [{**table["columns"][g], "stats": groups.get(g)} for g in columns],
        "group_dims": evaluation.get("group_dims") or [],
        "case_dims": evaluation.get("case_dims") or [],
        "binary": table["binary"],
        "counts": {"cases": len(table["rows"]), **counts},
        "comparison": other is not None,
        "total": len(shown),
        "offset": offset,
        "limit": limit,
        "rows": shown[offset : offset + limit],
    }


def evaluation_summary(evaluation: dict[str, Any]) -> dict[str, Any]:
    """What an eval job's page heads with: dims, groups, gate and baseline, without cells."""
    return {
        "eval": evaluation.get("eval"),
        "workflow": evaluation.get("workflow"),
        "case_dims": evaluation.get("case_dims") or [],
        "group_dims": evaluation.get("group_dims") or [],
        "sample_dim": evaluation.get("sample_dim"),
        "groups": evaluation.get("groups") or [],
        "gate": evaluation.get("gate"),
        "baseline": evaluation.get("baseline"),
        "cells": len(evaluation.get("cells") or []),
    }


def gate_label(record: dict[str, Any]) -> str | None:
    """``gate failed`` / ``gate passed`` / ``regressed`` for a job record, ``None`` if not gated.

    An eval is gated when a group has a threshold, or when a baseline was compared (a
    regression fails it); an eval with neither has no gate to pass (DESIGN §5, §8), so no
    ``gate passed``. A gate that failed for a reason of its own (scores that could not be
    computed) is ``gate failed`` all the same.
    """
    evaluation = record.get("evaluation")
    if not isinstance(evaluation, dict):
        return None
    gate = evaluation.get("gate")
    if not isinstance(gate, dict) or "passed" not in gate:
        return None
    if gate.get("regressed"):
        return "regressed"
    if not gate["passed"]:
        return "gate failed"
    groups = [g for g in evaluation.get("groups") or [] if isinstance(g, dict)]
    gated = any(g.get("threshold") is not None or g.get("baseline") for g in groups)
    return "gate passed" if gated else None


def cell_detail(
    store: Store,
    job_id: str,
    evaluation: dict[str, Any],
    index: int,
    invocations: dict[str, Any],
    table: dict[str, Any] | None = None,
    origins: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One matrix cell: its key, case, scores and invocations with their conversations.

    An invocation served from the cache shows the conversation of the job that ran it
    (``calls_from`` names that job), not only its stored result; ``origins`` keeps the
    invocations of those jobs between calls (the export asks for every cell). The case's
    own values (a kit ``Case``'s input and target) come from the job's recorded inputs.

    Raises:
        KeyError: the evaluation has no cell at that index.
    """
    cells = evaluation.get("cells") or []
    if not 0 <= index < len(cells):
        msg = f"Job {job_id} has no result cell {index} (it has {len(cells)})."
        raise KeyError(msg)
    cell = cells[index]
    table = table if table is not None else cell_table(evaluation)
    score = table["cells"].get((_frozen(cell.get("case") or {}), _frozen(cell.get("group") or {})))
    out_invocations = []
    sample_dim = evaluation.get("sample_dim")
    origins = origins if origins is not None else {}
    for address in cell.get("addresses") or []:
        inv = invocations.get(address)
        if inv is not None and inv.get("from_cache") and not inv.get("model_calls"):
            inv = {**inv, **_conversation_when_run(store, address, inv, origins)}
        sample = _key_in(address, sample_dim) if sample_dim else None
        if inv is None:
            out_invocations.append({"address": address, "status": "not recorded", "sample": sample})
            continue
        out_invocations.append(
            {
                "address": address,
                "sample": sample,
                "step": inv.get("step"),
                "status": inv.get("status"),
                "from_cache": bool(inv.get("from_cache")),
                "reason": inv.get("reason"),
                "error": inv.get("error"),
                "result": render_value(inv.get("result_text"), store),
                "model_calls": [model_call_view(c) for c in inv.get("model_calls") or []],
                "calls_from": inv.get("calls_from"),
            }
        )
    return {
        "job_id": job_id,
        "index": index,
        "group": cell.get("group") or {},
        "case": cell.get("case") or {},
        "case_inputs": case_inputs(store, job_id, cell.get("case") or {}, origins),
        "values": cell.get("values") or [],
        "status": cell.get("status"),
        "score": score,
        "sample_dim": evaluation.get("sample_dim"),
        "invocations": out_invocations,
    }


def _conversation_when_run(
    store: Store, address: str, inv: dict[str, Any], origins: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The model calls of the run that made a cached result, from that job's record."""
    try:
        entry = store.get_entry(address)
    except (KeyError, ValueError):
        return {}
    if entry is None or entry.damaged or entry.fingerprint != inv.get("fingerprint"):
        return {}
    origin = entry.meta.get("job_id")
    if not isinstance(origin, str) or not store.has_job(origin):
        return {}
    if origin not in origins:
        origins[origin] = store.job_invocations(origin)
    ran = origins[origin].get(address) or {}
    calls = ran.get("model_calls")
    return {"model_calls": calls, "calls_from": origin} if calls else {}


def case_inputs(
    store: Store,
    job_id: str,
    case: dict[str, Any],
    memo: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The job's inputs that vary with the case, at this case: ``{input name: value}``.

    Read from the job record's encoded inputs (an Array over the case dimensions), each
    value rendered as the viewer shows values (a kit ``Case`` as its fields: id, input,
    target, metadata). Inputs over other dimensions (the models) are left out.
    """
    if not case:
        return {}
    memo = memo if memo is not None else {}
    key = f"inputs:{job_id}"
    if key not in memo:
        try:
            raw = store.get_job(job_id).get("inputs") or {}
            memo[key] = {n: json.loads(t) for n, t in raw.items() if isinstance(t, str)}
        except (KeyError, ValueError):
            memo[key] = {}
    out: dict[str, Any] = {}
    for name, tree in memo[key].items():
        if not isinstance(tree, dict) or "$array" not in tree:
            continue
        dims = [d for d, _ in tree["$array"]]
        if not dims or set(dims) - set(case):
            continue
        try:
            positions = [
                [str(k) for k in keys].index(str(case[d]))
                for d, keys in zip(dims, tree["keys"], strict=True)
            ]
        except (ValueError, KeyError, TypeError):
            continue
        flat = 0
        for position, keys in zip(positions, tree["keys"], strict=True):
            flat = flat * len(keys) + position
        cells = tree.get("cells") or []
        if flat < len(cells):
            out[name] = render_tree(cells[flat], store)
    return out


def _key_in(address: str, dim: str) -> str | None:
    """The key of the trailing ``dim`` of an address (``...[model=a,sample=3]`` → ``3``)."""
    match = re.search(rf"[\[,]{re.escape(dim)}=([^,\[\]\"]*)\]$", address)
    return match.group(1) if match else None


MAX_TEXT = 20_000
"""Characters of a message or reply shown; the rest is counted (capture cuts there too)."""


def _short(text: Any) -> Any:
    if isinstance(text, str) and len(text) > MAX_TEXT:
        return {"kind": "text", "text": text[:MAX_TEXT], "omitted": len(text) - MAX_TEXT}
    return text


def model_call_view(call: dict[str, Any]) -> dict[str, Any]:
    """A model call as the panels show it: usage, and its messages and reply (long ones cut)."""
    keys = (
        "model",
        "provider",
        "role",
        "status",
        "input_tokens",
        "output_tokens",
        "cached_input_tokens",
        "cost_usd",
        "reason",
        "category",
        "error",
        "started_at",
        "ended_at",
    )
    out = {k: call.get(k) for k in keys if k in call}
    messages = call.get("messages")
    if isinstance(messages, list):
        out["messages"] = [
            {"role": str(m.get("role")), "content": _short(_content(m.get("content")))}
            for m in messages
            if isinstance(m, dict)
        ]
    if "reply" in call:
        out["reply"] = _short(call.get("reply"))
    return out


def _content(content: Any) -> Any:
    if isinstance(content, str) or content is None:
        return content
    if isinstance(content, list):  # content parts: show their text
        parts = [p.get("text") if isinstance(p, dict) else p for p in content]
        return "\n".join(str(p) for p in parts if p is not None)
    return str(content)


def compare_evaluations(
    baseline: dict[str, Any],
    run: dict[str, Any],
    *,
    margin: float = 0.0,
    confidence: float = 0.95,
) -> list[dict[str, Any]]:
    """Section 8's comparison of ``run`` against ``baseline``, one row per group.

    Each row is ``fxtr.scores.compare``'s group dict plus ``label`` and ``baseline_mean``
    (its ``mean``, named for what it is). The eval's threshold, when every group has the same,
    is the bar cases flip on.
    """
    thresholds = {t for t in _thresholds(run).values() if t is not None}
    rows = compare(
        baseline["cells"],
        run["cells"],
        margin=margin,
        confidence=confidence,
        threshold=thresholds.pop() if len(thresholds) == 1 else None,
    )
    out = []
    for row in rows:
        group = row.get("group")
        if isinstance(group, list | tuple):  # a group key of (dim, key) pairs
            group = dict(group)
        group = dict(group or {})
        out.append(
            {
                **row,
                "group": group,
                "label": key_label(group) if group else "all",
                "baseline_mean": row.get("mean"),
            }
        )
    return out
