"""The ``fxtr summary`` as Markdown: ``$GITHUB_STEP_SUMMARY`` and ``--fxtr-markdown PATH``.

Built from the same evaluations and formatters as the terminal summary (``_summary``), so the
two always print the same figures.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from fxtr.report import escape_controls
from pytest_fxtr._summary import (
    _flips,
    _gate,
    _signed,
    corrected_note,
    cost_rows,
    describe,
    failure_lines,
    flaky_lines,
    flipped_lines,
    gate_text,
    interval,
    judge_lines,
    num,
    pass_at_lines,
    review_lines,
    usd,
)


def markdown(jobs: dict[str, dict[str, Any]], evaluations: list[dict[str, Any]]) -> str:
    """The summary as Markdown (GitHub's job summary).

    Per eval: its gate, score groups, baseline differences, flaky cases and cost.
    """
    out = ["## fxtr summary", ""]
    for e in evaluations:
        info = jobs.get(e.get("job_id") or "")
        label = gate_text(e)
        gate = {"gate passed": "gate passed", "-": "not gated"}.get(label, "gate **failed**")
        if label == "regressed":
            gate += " (regressed)"
        out.append(f"### {_code(e['eval'])} ({_md(e['workflow'])}): {gate}")
        out.append("")
        if info is not None:
            out.append(
                f"job `{e['job_id']}`, attempt {info['attempt'].get('attempt')}, "
                f"{info['attempt'].get('status')}"
            )
            out.append("")
        if e["groups"]:
            out.append("| group | mean | 95% CI | interval | n | missing | threshold | gate |")
            out.append("|---|---:|---|---|---:|---:|---:|---|")
            for g in e["groups"]:
                out.append(
                    f"| {_md(describe(g['group']))} | {num(g.get('mean'))} | "
                    f"{interval(g.get('low'), g.get('high'))} | {g.get('interval') or '-'} | "
                    f"{g.get('n')} | {g.get('missing')} | {num(g.get('threshold'))} | "
                    f"{_gate(g)} |"
                )
            out.extend([*("\\" + _md(line) for line in corrected_note(e["groups"])), ""])
        compared = [g for g in e["groups"] if g.get("baseline")]
        if compared:
            out.append(f"Baseline: job `{compared[0]['baseline'].get('job_id')}`")
            out.append("")
            out.append(
                "| group | baseline | this run | diff | 95% CI | paired | flipped | MDE | verdict |"
            )
            out.append("|---|---:|---:|---:|---|---:|---|---:|---|")
            for g in compared:
                b = g["baseline"]
                out.append(
                    f"| {_md(describe(g['group']))} | {num(b.get('mean'))} | "
                    f"{num(g.get('mean'))} | {_signed(b.get('delta'))} | "
                    f"{interval(b.get('low'), b.get('high'))} | {b.get('n_paired')} | "
                    f"{_flips(b)} | {num(b.get('mde'))} | {b.get('verdict')} |"
                )
            out.append("")
        for line in pass_at_lines(e["groups"]) + flaky_lines(e["groups"]):
            out.append(f"- {_md(line)}")
        for line in judge_lines(e["groups"], width=None):
            out.append(f"- {_md(line)}")
        if compared:
            for line in flipped_lines(compared):
                out.append(f"- {_md(line)}")
        for note in e["notes"]:
            out.append(f"- {_md(note)}")
        review = [i for i in (info or {}).get("invocations", ()) if i["status"] == "needs_review"]
        for i, line in enumerate(review_lines(review)):
            out.append(f"- **{_md(line)}**" if i == 0 else f"- {_md(line)}")
        if info is not None:
            costs = cost_rows(info["invocations"])
            if costs:
                out.append("")
                out.append(
                    "| model | role | calls | input tokens | output tokens | cost | "
                    "saved by cache |"
                )
                out.append("|---|---|---:|---:|---:|---:|---:|")
                for r in costs:
                    out.append(
                        f"| {_md(r['model'])} | {r['role']} | {r['calls']} | "
                        f"{r['input_tokens']} | {r['output_tokens']} | {usd(r['usd'])} | "
                        f"{usd(r['saved_usd'])} |"
                    )
        out.append("")
    failures = failure_lines(evaluations)
    if failures:
        out.extend(f"**{_md(line)}**" for line in failures)
        out.append("")
    return "\n".join(out)


_ACTIVE = re.compile(r"\||<(?=[A-Za-z/!?])|(?<=\])[(\[]")
"""What makes Markdown (GitHub's) of a text: a table cell's ``|``, the ``<`` of an HTML tag or
autolink, and the ``(`` or ``[`` after a ``]`` that makes a link or an image."""


def _md(text: str) -> str:
    """Text of the run (case ids, errors, notes) as Markdown that reads as itself.

    Control characters are escaped as in the terminal (``escape_controls``: one line, no
    escape code), and each character that would make a table cell, an HTML tag, a link or
    an image gets a backslash (``a < b`` and ``[0.1, 0.2]`` are left as they read).
    """
    return _ACTIVE.sub(lambda m: "\\" + m.group(0), escape_controls(str(text)))


def _code(text: str) -> str:
    """Text as a code span, its fence longer than any run of backticks inside it."""
    text = escape_controls(str(text))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def write_markdown(
    path: Path | None, jobs: dict[str, dict[str, Any]], evaluations: list[dict[str, Any]]
) -> None:
    """Write the Markdown summary to ``path`` and append it to ``$GITHUB_STEP_SUMMARY``."""
    if path is None and not os.environ.get("GITHUB_STEP_SUMMARY"):
        return
    from fxtr.secrets import redact

    text = redact(markdown(jobs, evaluations))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as f:
            f.write(text)
