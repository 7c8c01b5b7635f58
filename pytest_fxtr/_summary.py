"""Scores and the ``fxtr summary`` section (the JSON report: ``_report``; Markdown: ``_markdown``).

All are built on the controller from item reports and the store, so pytest-xdist workers and
a plain run look the same.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from pytest_fxtr._format import WIDTH, case_label, describe, interval, num, short, usd


def cost_rows(invocations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Calls, tokens and dollars per model and role for this attempt (one row for each).

    A model that was the subject and a judge has two rows (``fxtr.report``'s
    ``cost_rows``); a row whose price is unknown has ``usd`` ``None`` (shown ``n/a``).
    """
    from fxtr.report._views import cost_rows as rows_of

    return rows_of(invocations)


def cost_total(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The total of the rows; dollars ``None`` when every model is unpriced."""
    priced = [r for r in rows if r["usd"] is not None]
    if not rows:
        priced = [{"usd": 0.0, "saved_usd": 0.0}]
    return {
        "calls": sum(r["calls"] for r in rows),
        "input_tokens": sum(r["input_tokens"] for r in rows),
        "output_tokens": sum(r["output_tokens"] for r in rows),
        "usd": sum(r["usd"] for r in priced) if priced else None,
        "saved_usd": sum(r["saved_usd"] for r in priced) if priced else None,
        "unpriced": sum(r["unpriced_calls"] or r["usd"] is None for r in rows),
    }


def _total_usd(total: dict[str, Any], key: str = "usd") -> str:
    text = usd(total[key])
    return text + " + n/a" if total["unpriced"] and total[key] is not None else text


def _model_label(row: dict[str, Any]) -> str:
    return row["model"] if row["role"] == "subject" else f"{row['model']} ({row['role']})"


# the terminal summary


def render(
    tr: Any,
    jobs: dict[str, dict[str, Any]],
    evaluations: list[dict[str, Any]],
    verbose: int,
    *,
    budget: Any = None,
) -> None:
    """Write the ``fxtr summary`` section; failed gates and regressions come last.

    With ``--fxtr-max-cost``, the last line says when the budget was reached.
    """
    by_job = {e["job_id"]: e for e in evaluations if e.get("job_id")}
    tr.section("fxtr summary", sep="=")
    for job_id, info in jobs.items():
        evaluation = by_job.get(job_id)
        if verbose < 0:
            tr.write_line(_one_line(job_id, info, evaluation))
            continue
        _job_block(tr, job_id, info, verbose)
        if evaluation is not None:
            _scores_block(tr, evaluation)
        tr.write_line("")
    for evaluation in evaluations:
        if evaluation.get("job_id") not in jobs:
            for note in evaluation["notes"]:
                tr.write_line(f"fxtr: {evaluation['eval']}: {note}")
    for line in failure_lines(evaluations):
        tr.write_line(line, red=True, bold=True)
    _cost_controls(tr, jobs, budget)


def _cost_controls(tr: Any, jobs: dict[str, dict[str, Any]], budget: Any) -> None:
    """The limits that adapted to rate limits, and the budget's line (the last one)."""
    final: dict[str, dict[str, Any]] = {}
    for info in jobs.values():
        final.update((info.get("record") or {}).get("limiters") or {})
    for key, lim in sorted(final.items()):
        if any(h["limit"] != lim["start"] for h in lim.get("history", ())):
            server, _, model = key.rpartition("#")
            tr.write_line(
                f"concurrency of {model} at {server}: {lim['limit']} at the end "
                f"(started at {lim['start']}; {lim.get('rate_limited', 0)} rate-limited)"
            )
    if budget is not None and budget.reached:
        tr.write_line(f"budget reached: ${budget.spent:.4f} of ${budget.limit:g}", red=True)


def gate_text(evaluation: dict[str, Any] | None) -> str:
    """The gate as every view says it (``fxtr.report``'s label): ``-`` when not gated."""
    from fxtr.report._evals import gate_label

    if evaluation is None:
        return "-"
    return gate_label({"evaluation": evaluation}) or "-"


def _one_line(job_id: str, info: dict[str, Any], evaluation: dict[str, Any] | None) -> str:
    from fxtr.report._names import job_title

    total = cost_total(cost_rows(info["invocations"]))
    damaged = len(info["attempt"].get("damaged") or [])
    return (
        f"fxtr: {job_title(info['record'])} · {job_id} · {info['attempt'].get('status')} · "
        f"{_total_usd(total)} · {gate_text(evaluation)}"
        + (f" · {damaged} damaged" if damaged else "")
    )


def _job_block(tr: Any, job_id: str, info: dict[str, Any], verbose: int) -> None:
    from tabulate import tabulate

    record, invocations, attempt = info["record"], info["invocations"], info["attempt"]
    commit = ""
    if record.get("commit"):
        commit = f" · commit {record['commit'][:10]}" + (" (dirty)" if record.get("dirty") else "")
    from fxtr.report._names import job_title

    tr.write_line(
        f"{job_title(record)} · job {job_id} · attempt {attempt.get('attempt')} · "
        f"{attempt.get('status')}{commit}"
    )
    rows: dict[str, Counter[str]] = defaultdict(Counter)
    seconds: dict[str, float] = defaultdict(float)
    for inv in invocations:
        row = rows[inv["step"]]
        row[inv["status"]] += 1
        row[
            "cached" if inv.get("from_cache") else ("ran" if inv.get("started_at") else "not run")
        ] += 1
        if inv.get("started_at") and inv.get("ended_at") and not inv.get("from_cache"):
            seconds[inv["step"]] += inv["ended_at"] - inv["started_at"]
    table = [
        [
            short(step, 30),
            sum(c[s] for s in ("succeeded", "failed", "skipped", "needs_review")),
            c["succeeded"],
            c["failed"],
            c["skipped"],
            c["needs_review"],
            c["ran"],
            c["cached"],
            f"{seconds[step]:.2f}s",
        ]
        for step, c in sorted(rows.items())
    ]
    headers = ["step", "invocations", "ok", "failed", "skipped", "review", "ran", "cached", "time"]
    tr.write_line(tabulate(table, disable_numparse=True, headers=headers))
    costs = cost_rows(invocations)
    if costs:
        tr.write_line("")
        total = cost_total(costs)
        table = [
            [
                short(_model_label(r), 40),
                r["calls"],
                r["input_tokens"],
                r["output_tokens"],
                usd(r["usd"]),
                usd(r["saved_usd"]),
            ]
            for r in costs
        ]
        table.append(
            [
                "total",
                total["calls"],
                total["input_tokens"],
                total["output_tokens"],
                _total_usd(total),
                _total_usd(total, "saved_usd"),
            ]
        )
        headers = ["model", "calls", "in tokens", "out tokens", "cost", "saved by cache"]
        tr.write_line(tabulate(table, disable_numparse=True, headers=headers))
    _agents_block(tr, info.get("agents") or [])
    _sandboxes_block(tr, info.get("sandboxes") or [])
    _failures_block(tr, invocations, verbose)
    damaged = attempt.get("damaged") or []
    if damaged:
        tr.write_line("")
        tr.write_line(
            f"damaged: {len(damaged)} cached result(s) failed their checksum or could not be "
            "read, and were recomputed; e.g."
        )
        tr.write_line(short(f"  {damaged[0]}", WIDTH))
    for line in hermeticity_lines(invocations, verbose):
        tr.write_line(line)


def hermeticity_lines(invocations: list[dict[str, Any]], verbose: int) -> list[str]:
    """The summary's lines on invocations that touched local state.

    The first notice in full, wrapped (never cut) to the summary's width; with ``-v`` every
    invocation and every notice.
    """
    import textwrap

    noticed = [i for i in invocations if i.get("warnings")]
    if not noticed:
        return []
    lines = ["", f"hermeticity: {len(noticed)} invocation(s) touched local state"]
    if verbose > 0:
        shown = [(inv["address"], inv["warnings"]) for inv in noticed]
    else:
        first = noticed[0]
        shown = [(first["address"], first["warnings"][:1])]
        lines[-1] += "; e.g. (-v lists all)"
    for address, notices in shown:
        lines.extend(
            textwrap.wrap(
                address,
                WIDTH - 2,
                initial_indent="  ",
                subsequent_indent="    ",
                break_on_hyphens=False,
            )
            or ["  "]
        )
        for notice in notices:
            lines.extend(
                textwrap.wrap(
                    notice,
                    WIDTH - 4,
                    initial_indent="    ",
                    subsequent_indent="      ",
                    break_on_hyphens=False,
                )
            )
    return lines


def _agents_block(tr: Any, rows: list[dict[str, Any]]) -> None:
    """Agent evals: per model the mean turns and tool calls, tool errors, stops by kind."""
    if not rows:
        return
    from tabulate import tabulate

    from fxtr.agents._report import stops_text

    table = [
        [
            short(r["model"], 30),
            r["trajectories"],
            f"{r['mean_turns']:.1f}",
            f"{r['mean_tool_calls']:.1f}",
            r["tool_errors"],
            short(stops_text(r["stops"]), 40),
        ]
        for r in rows
    ]
    headers = ["agent model", "trajectories", "turns", "tool calls", "tool errors", "stops"]
    tr.write_line("")
    tr.write_line(tabulate(table, disable_numparse=True, headers=headers))


def _sandboxes_block(tr: Any, rows: list[dict[str, Any]]) -> None:
    """Sandbox agents: per model the sandbox calls, timeouts, errors, and the backend."""
    if not rows:
        return
    from tabulate import tabulate

    table = [
        [
            short(r["model"], 30),
            r["calls"],
            r["timeouts"],
            r["errors"],
            r["failed"],
            ", ".join("local (no isolation)" if b == "local" else b for b in r["backends"]),
        ]
        for r in rows
    ]
    headers = ["sandbox model", "calls", "timeouts", "errors", "failed to start", "backend"]
    tr.write_line("")
    tr.write_line(tabulate(table, disable_numparse=True, headers=headers))


def _failures_block(tr: Any, invocations: list[dict[str, Any]], verbose: int) -> None:
    from tabulate import tabulate

    failed = [i for i in invocations if i["status"] == "failed"]
    review = [i for i in invocations if i["status"] == "needs_review"]
    if not failed and not review:
        return
    tr.write_line("")
    by_reason: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for inv in failed:
        by_reason[inv.get("reason") or "unknown"].append(inv)
    if review:
        by_reason["needs_review"] = review
    table = [
        [reason, len(invs), short(invs[0]["address"], 40), short(invs[0].get("error"), 30)]
        for reason, invs in sorted(by_reason.items())
    ]
    headers = ["reason", "count", "example", "error"]
    tr.write_line(tabulate(table, disable_numparse=True, headers=headers))
    if verbose > 0:
        for inv in failed + review:
            tr.write_line(f"  {inv['status']} {inv['address']}: {inv.get('error')}")
    for line in review_lines(review):
        for part in wrapped(f"  {line}"):
            tr.write_line(part)


def review_lines(review: list[dict[str, Any]]) -> list[str]:
    """What invocations left in review mean and the way out (the terminal and the Markdown)."""
    import shlex

    if not review:
        return []
    return [
        f"{len(review)} invocation(s) in review: the store holds results computed from other "
        "inputs or code at their addresses, so their cases are missing and nothing was "
        f"compared for them; `fxtr cache why {shlex.quote(review[0]['address'])}` says what "
        "changed.",
        "Rerun with --fxtr-cache-conflict=overwrite to run them (the old results stay kept: "
        "`fxtr cache history ADDRESS`, `fxtr cache restore`); under CI=true that is the "
        "default unless review is asked for.",
    ]


def _gate(g: dict[str, Any]) -> str:
    """``pass``/``FAIL``, with the value gated on when it was a judge's corrected one."""
    if g.get("threshold") is None:
        return "-"
    verdict = "pass" if g.get("passed") else "FAIL"
    return verdict + "*" if g.get("gated_on") == "corrected" else verdict


CORRECTED_NOTE = "* gated on the judge's corrected value, not the mean (the judge line gives it)"
"""Said under a scores table whose gate column marks a group gated on its corrected value."""


def corrected_note(groups: list[dict[str, Any]]) -> list[str]:
    """``[CORRECTED_NOTE]`` when a group was gated on its corrected value, else ``[]``."""
    gated = any(g.get("gated_on") == "corrected" and g.get("threshold") is not None for g in groups)
    return [CORRECTED_NOTE] if gated else []


def _scores_block(tr: Any, evaluation: dict[str, Any]) -> None:
    groups = evaluation["groups"]
    if groups:
        tr.write_line("")
        table = [
            [
                describe(g["group"]),
                num(g.get("mean")),
                interval(g.get("low"), g.get("high")),
                g.get("interval") or "-",
                g.get("n"),
                g.get("missing"),
                num(g.get("threshold")),
                _gate(g),
            ]
            for g in groups
        ]
        headers = ["group", "mean", "95% CI", "interval", "n", "missing", "threshold", "gate"]
        tr.write_line(fit_table(table, headers))
    lines = corrected_note(groups) + pass_at_lines(groups) + flaky_lines(groups)
    for line in lines + judge_lines(groups):
        tr.write_line(line)
    compared = [g for g in groups if g.get("baseline")]
    if compared:
        tr.write_line("")
        tr.write_line(short(f"baseline: job {compared[0]['baseline'].get('job_id')}", WIDTH))
        table = [
            [
                describe(g["group"]),
                num(b.get("mean")),
                num(g.get("mean")),
                _signed(b.get("delta")),
                interval(b.get("low"), b.get("high")),
                b.get("n_paired"),
                _flips(b),
                num(b.get("mde")),
                b.get("verdict"),
            ]
            for g in compared
            for b in [g["baseline"]]
        ]
        headers = ["group", "base", "this", "diff", "95% CI", "n", "flips", "mde", "verdict"]
        tr.write_line(fit_table(table, headers))
        for line in flipped_lines(compared):
            tr.write_line(line)
    for note in evaluation["notes"]:
        for line in wrapped(f"fxtr: {note}"):
            tr.write_line(line)


def wrapped(text: str) -> list[str]:
    """A line of the summary wrapped at its width onto indented lines; nothing is cut."""
    import textwrap

    return textwrap.wrap(
        text.replace("\n", " "), WIDTH, subsequent_indent="    ", break_on_hyphens=False
    )


def fit_table(table: list[list[Any]], headers: list[str]) -> str:
    """A table whose first column (a group's name) is never cut.

    When the table would be wider than the summary, the names wrap onto further lines of
    their row instead.
    """
    from tabulate import tabulate

    text = str(tabulate(table, disable_numparse=True, headers=headers))
    widest = max(len(line) for line in text.splitlines())
    if widest <= WIDTH:
        return text
    longest = max(len(str(row[0])) for row in table)
    room = max(12, longest - (widest - WIDTH))
    widths: list[int | None] = [room, *([None] * (len(headers) - 1))]
    return str(tabulate(table, disable_numparse=True, headers=headers, maxcolwidths=widths))


def _signed(value: float | None) -> str:
    from fxtr.report._evals import format_signed

    return format_signed(value)


def _flips(b: dict[str, Any]) -> str:
    flipped = b.get("flipped") or {}
    return f"-{len(flipped.get('to_fail') or [])}/+{len(flipped.get('to_pass') or [])}"


def _names(keys: list[Any], room: int) -> str:
    text = ", ".join(case_label(k) for k in keys)
    return short(text, room)


def flaky_lines(groups: list[dict[str, Any]]) -> list[str]:
    """One line per group with flaky cases: how many, and the first names."""
    lines = []
    for g in groups:
        cases = g.get("cases") or {}
        flaky = g.get("flaky") or [k for k, c in cases.items() if c.get("verdict") == "flaky"]
        if flaky:
            head = f"flaky ({describe(g['group'])}): {len(flaky)} of {len(cases)}: "
            lines.append(short(head + _names(flaky, WIDTH - len(head)), WIDTH))
    return lines


def flipped_lines(groups: list[dict[str, Any]]) -> list[str]:
    """The cases that flipped against the baseline, per group."""
    lines = []
    for g in groups:
        flipped = g["baseline"].get("flipped") or {}
        for direction, field in (("to fail", "to_fail"), ("to pass", "to_pass")):
            keys = flipped.get(field)
            if keys:
                head = f"flipped {direction} ({describe(g['group'])}): "
                lines.append(short(head + _names(keys, WIDTH - len(head)), WIDTH))
    return lines


PASS_AT_SHOWN = 4
"""pass@k and pass^k are shown for this many values of k (the report has every k)."""


def pass_at_lines(groups: list[dict[str, Any]]) -> list[str]:
    """``pass@k`` and ``pass^k`` per group, for k = 1, the largest k and a few between."""
    lines = []
    for g in groups:
        at = g.get("pass_at") or {}
        hat = g.get("pass_hat") or {}
        if not at:
            continue
        ks = sorted(int(k) for k in at)
        last = len(ks) - 1
        shown = sorted({ks[i * last // (PASS_AT_SHOWN - 1)] for i in range(PASS_AT_SHOWN)})
        parts = []
        for k in shown:
            a = at.get(k, at.get(str(k))) or {}
            part = f"@{k} {num(a.get('value'))}"
            h = hat.get(k, hat.get(str(k)))
            if h:
                part += f" ^{num(h.get('value'))}"
            parts.append(part)
        lines.append(short(f"pass@k, pass^k ({describe(g['group'])}): " + "  ".join(parts), WIDTH))
    return lines


def judge_lines(groups: list[dict[str, Any]], width: int | None = WIDTH) -> list[str]:
    """Per judged group: raw and corrected means, q0, q1, flips, position bias (wrapped).

    DESIGN §15; ``fxtr.report``'s formatter, which ``fxtr show`` prints too.
    """
    from fxtr.report import judge_lines as lines_of

    return lines_of(groups, width)


def failure_lines(evaluations: list[dict[str, Any]]) -> list[str]:
    """Why the run fails on scores: every missed gate and every regression, one line each.

    A failed gate's line gives each reason that failed it, and the value the gate used with
    its own interval (the corrected value with the corrected interval, for a judge).
    """
    lines: list[str] = []
    for e in evaluations:
        if not e["gate"]["passed"] and not e["groups"]:
            lines.extend(
                f"fxtr: score gate failed for {e['eval']}: {p}" for p in e["gate"]["failed"]
            )
        for g in e["groups"]:
            if g.get("passed") is False:
                used = g["corrected"] if g.get("gated_on") == "corrected" else g
                lines.append(
                    f"fxtr: score gate failed for {e['eval']} ({describe(g['group'])}): "
                    f"{_why(g)}; 95% CI {interval(used.get('low'), used.get('high'))}, "
                    f"n={g.get('n')}, missing={g.get('missing')}"
                )
        for g in e["groups"]:
            b = g.get("baseline") or {}
            if b.get("verdict") == "regressed":
                lines.append(
                    f"fxtr: regression in {e['eval']} ({describe(g['group'])}): "
                    f"{num(b.get('mean'))} -> {num(g.get('mean'))}, "
                    f"diff {_signed(b.get('delta'))}, "
                    f"95% CI {interval(b.get('low'), b.get('high'))}, "
                    f"{b.get('n_paired')} paired cases, vs job {b.get('job_id')}"
                )
    return lines


def _why(g: dict[str, Any]) -> str:
    """Each reason a group's gate failed (DESIGN §15).

    Missing cases, the value under the threshold, an interval that spans the whole range,
    the judge that was unusable.
    """
    from pytest_fxtr._gates import spans_range

    parts = [f"{g['missing']} case(s) missing"] if g.get("missing") else []
    if g.get("incomplete"):
        parts.append(f"{g['incomplete']} case(s) with samples missing")
    mean, threshold = g.get("mean"), g.get("threshold")
    corrected = g.get("corrected") if g.get("gated_on") == "corrected" else None
    value = corrected.get("value") if corrected else mean
    used = f"corrected {num(value)}" if corrected else f"mean {num(value)}"
    raw = f" (raw {num(mean)})" if corrected else ""
    below = value is not None and threshold is not None and value < threshold
    if value is None:
        parts.append(f"no value (threshold {num(threshold)})")
    elif below:
        parts.append(f"{used} < threshold {num(threshold)}{raw}")
    if spans_range(g):
        low, high = g.get("range") or (0.0, 1.0)
        more = "more cases or gold cases" if corrected else "more cases"
        parts.append(
            ("its" if below else f"{used}: its") + " interval spans the whole range of the "
            f"score [{num(low)}, {num(high)}], so nothing was measured ({more})"
        )
    if (g.get("judge") or {}).get("usable") is False:
        parts.append("judge unusable (not clearly better than chance): gated on the raw mean")
    if all(part.startswith("judge unusable") for part in parts):
        parts.insert(0, f"{used}, threshold {num(threshold)}{raw}")
    return ", ".join(parts)
