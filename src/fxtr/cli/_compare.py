"""``fxtr compare JOB_A JOB_B``: B against A per group, as DESIGN section 8 compares a baseline."""

from __future__ import annotations

from typing import Any

from fxtr.report._evals import (
    compare_evaluations,
    format_interval,
    format_score,
    format_signed,
    key_label,
)

MAX_FLIPPED = 10
"""Flipped cases named per group and direction; the rest are counted."""


def _signed(value: Any) -> str:
    return format_signed(float(value)) if isinstance(value, int | float) else "-"


def _interval(row: dict[str, Any]) -> str:
    return format_interval(row.get("low"), row.get("high"))


def _case(case: Any) -> str:
    if isinstance(case, dict):
        return key_label(case)
    if isinstance(case, list | tuple) and all(isinstance(p, list | tuple) for p in case):
        return key_label(dict(case))
    return str(case)


def flipped_of(row: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The cases of a group that went pass→fail and fail→pass, as labels."""
    flipped = row.get("flipped") or {}
    return (
        [_case(c) for c in flipped.get("to_fail") or []],
        [_case(c) for c in flipped.get("to_pass") or []],
    )


def comparison_lines(
    a_id: str, b_id: str, a_eval: dict[str, Any], b_eval: dict[str, Any], margin: float
) -> tuple[list[str], bool]:
    """The table and the flipped cases that ``fxtr compare`` prints, and whether B regressed."""
    from tabulate import tabulate

    rows = compare_evaluations(a_eval, b_eval, margin=margin)
    table = []
    notes = []
    regressed = False
    for row in rows:
        to_fail, to_pass = flipped_of(row)
        regressed = regressed or row.get("verdict") == "regressed"
        table.append(
            [
                row["label"],
                format_score(row.get("baseline_mean")),
                format_score(row.get("run_mean")),
                _signed(row.get("delta")),
                _interval(row),
                row.get("n_paired", "-"),
                f"{len(to_fail)}↓ {len(to_pass)}↑",
                format_score(row.get("mde")),
                row.get("verdict") or "-",
            ]
        )
        for arrow, cases in (("pass→fail", to_fail), ("fail→pass", to_pass)):
            if cases:
                more = f" … {len(cases) - MAX_FLIPPED} more" if len(cases) > MAX_FLIPPED else ""
                notes.append(f"  {row['label']}: {arrow}: {', '.join(cases[:MAX_FLIPPED])}{more}")
        only_a, only_b = row.get("only_in_baseline") or 0, row.get("only_in_run") or 0
        if only_a or only_b:
            notes.append(
                f"  {row['label']}: {_count(only_a)} case(s) only in A, {_count(only_b)} only "
                "in B (not paired)"
            )
    dims = ", ".join(b_eval.get("group_dims") or []) or "group"
    headers = [dims, "A mean", "B mean", "delta", "interval", "n paired", "flipped", "MDE"]
    lines = [
        f"B {b_id} against A {a_id} · {b_eval.get('eval') or b_eval.get('workflow') or ''}",
        tabulate(table, headers=[*headers, "verdict"], disable_numparse=True),
    ]
    if notes:
        lines += ["", "flipped cases:", *notes]
    return lines, regressed


def _count(value: Any) -> int:
    return len(value) if isinstance(value, list | tuple | dict) else int(value or 0)
