"""The judge's figures as every view prints them (DESIGN §11, §15).

One formatter for the terminal summary, the Markdown, ``fxtr show`` and ``fxtr resume``: per
judged group the raw and corrected means, the judge's ``q0`` and ``q1`` with their Wilson
intervals, its flip rate and position inconsistency. A line longer than the width wraps onto
indented lines; nothing is cut.
"""

from __future__ import annotations

import textwrap
from typing import Any

from fxtr.report._evals import format_interval, format_score

JUDGE_WIDTH = 100
"""The terminal's lines are at most this wide (the summary's width)."""


def judge_parts(group: dict[str, Any]) -> list[str]:
    """The figures of one judged group, each a short phrase (``[]`` when not judged)."""
    judge = group.get("judge")
    if not isinstance(judge, dict):
        return []
    parts = []
    corrected = group.get("corrected")
    if corrected:
        used = " (the gate's)" if group.get("gated_on") == "corrected" else ""
        parts.append(
            f"raw {format_score(group.get('mean'))} -> corrected{used} "
            f"{format_score(corrected.get('value'))} "
            f"{format_interval(corrected.get('low'), corrected.get('high'))}"
        )
    elif judge.get("usable") is False:
        parts.append(
            f"raw {format_score(group.get('mean'))}, judge unusable (not clearly better than "
            "chance): not corrected, gated on the raw mean"
        )
    for name in ("q0", "q1"):
        rate = judge.get(name)
        if rate:
            parts.append(
                f"{name} {format_score(rate.get('value'))} "
                f"{format_interval(rate.get('low'), rate.get('high'))} n={rate.get('n')}"
            )
    if judge.get("flip_rate") is not None:
        parts.append(f"flip rate {format_score(judge['flip_rate'])}")
    if judge.get("position_inconsistency") is not None:
        parts.append(f"position inconsistency {format_score(judge['position_inconsistency'])}")
    return parts


def judge_lines(groups: list[dict[str, Any]], width: int | None = JUDGE_WIDTH) -> list[str]:
    """Per judged group one line of figures, wrapped at ``width`` (``None``: never wrapped).

    Wrapped lines are indented by four spaces and break only between words, so every
    figure shows, however narrow the width.
    """
    lines = []
    for g in groups:
        parts = judge_parts(g)
        if not parts:
            continue
        group = ", ".join(f"{k}={v}" for k, v in (g.get("group") or {}).items()) or "all cases"
        text = f"judge ({group}): " + "; ".join(parts)
        if width is None:
            lines.append(text)
        else:
            lines.extend(
                textwrap.wrap(
                    text, width, subsequent_indent="    ", break_on_hyphens=False,
                    break_long_words=False,
                )
            )
    return lines
