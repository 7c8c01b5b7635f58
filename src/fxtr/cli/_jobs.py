"""The ``fxtr jobs`` table: one line a job, within 100 columns unless ``--wide``."""

from __future__ import annotations

from typing import Any

from fxtr.report import format_usd


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


JOBS_WIDTH = 100
"""``fxtr jobs`` fits in this many columns (``--wide`` lists every column, however wide)."""
WIDE_COLUMNS = (
    ("job", "job_id"),
    ("eval", "eval"),
    ("workflow", "workflow"),
    ("status", "status"),
    ("gate", "gate"),
    ("attempts", "attempts"),
    ("ran", "ran"),
    ("cached", "cached"),
    ("failed", "failed"),
    ("tokens", "tokens"),
    ("cost", "cost_usd"),
    ("started", "started"),
    ("commit", "commit"),
)


def jobs_table(rows: list[dict[str, Any]], *, wide: bool = False) -> str:
    """The ``fxtr jobs`` table: job, eval (or workflow), status, gate and cost.

    It fits in ``JOBS_WIDTH`` columns: the eval's name, cut at its start when it must be
    (``…test_qa.py::test_qa``), takes what the other columns leave. ``wide`` lists every
    column of ``job_row`` instead.
    """
    from tabulate import tabulate

    def text(row: dict[str, Any], key: str) -> str:
        if key == "cost_usd":
            return format_usd(row["cost_usd"]) if row["cost_usd"] is not None else "n/a"
        return _cell(row.get(key))

    if wide:
        table = [[text(r, key) for _, key in WIDE_COLUMNS] for r in rows]
        headers = [name for name, _ in WIDE_COLUMNS]
        return str(tabulate(table, headers=headers, disable_numparse=True))
    keys = ("job_id", "name", "status", "gate", "cost_usd")
    table = [
        [_cell(r["eval"] or r["workflow"]) if k == "name" else text(r, k) for k in keys]
        for r in rows
    ]
    headers = ["job", "eval or workflow", "status", "gate", "cost"]
    # tabulate's simple format: a column is as wide as its widest cell, or its header + 2
    widths = [max(len(h) + 2, *(len(line[i]) for line in table)) for i, h in enumerate(headers)]
    room = JOBS_WIDTH - sum(w for i, w in enumerate(widths) if i != 1) - 2 * (len(keys) - 1)
    room = max(room, len(headers[1]) + 2)
    for line in table:
        if len(line[1]) > room:
            line[1] = "…" + line[1][-(room - 1) :]
    return str(tabulate(table, headers=headers, disable_numparse=True))


def judge_figures(evaluation: dict[str, Any]) -> list[str]:
    """``fxtr show``'s judge lines: the summary's formatter, indented under the groups.

    Per judged group the raw and corrected means, q0, q1, flip rate and position
    inconsistency (DESIGN §15), wrapped at 100 columns, never cut.
    """
    from fxtr.report import judge_lines

    groups = [g for g in evaluation.get("groups") or [] if isinstance(g, dict)]
    return ["  " + line for line in judge_lines(groups, JOBS_WIDTH - 2)]
