"""Scores, the ``fxtr summary`` section and the JSON report.

All are built on the controller from item reports and the store, so pytest-xdist workers and
a plain run look the same.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

CASE = "case"


@dataclasses.dataclass
class Score:
    """The mean of one group's cells against its threshold."""

    eval: str
    job_id: str | None
    group: dict[str, str]
    values: list[float]
    missing: int
    threshold: float | None
    non_numeric: int = 0

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def stderr(self) -> float | None:
        if len(self.values) < 2:
            return None
        return statistics.stdev(self.values) / math.sqrt(len(self.values))

    @property
    def passed(self) -> bool:
        if self.threshold is None:
            return True
        if self.missing or self.non_numeric or self.mean is None:
            return False
        return self.mean >= self.threshold

    def why(self) -> str:
        """Why the group missed its threshold."""
        parts = []
        if self.non_numeric:
            parts.append(f"{self.non_numeric} value(s) are not numeric")
        if self.mean is None:
            parts.append("no value")
        elif self.threshold is not None and self.mean < self.threshold:
            parts.append(f"mean {self.mean:.4g} < threshold {self.threshold:g}")
        if self.missing:
            parts.append(f"{self.missing} case(s) missing")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "mean": self.mean,
            "stderr": self.stderr,
            "n": self.n,
            "missing": self.missing,
            "threshold": self.threshold,
            "passed": self.passed,
        }


def scores(payloads: list[dict[str, Any]]) -> list[Score]:
    """Group item payloads per eval and per key of the non-case dimensions."""
    out: dict[tuple[str, str], Score] = {}
    seen: set[tuple[str, tuple[Any, ...]]] = set()
    missing_items: dict[tuple[str, str], set[str]] = defaultdict(set)
    for p in payloads:
        dims = p["dims"] or [d for d in p["keys"] if d != CASE] + (
            [CASE] if CASE in p["keys"] else []
        )
        group_dims = [d for d in dims if d != CASE]
        if p["missing"]:
            group = {d: p["keys"][d] for d in group_dims if d in p["keys"]}
            gkey = (p["eval"], json.dumps(group, sort_keys=True))
            score = out.setdefault(
                gkey, Score(p["eval"], p["job_id"], group, [], 0, p["threshold"])
            )
            missing_items[gkey].add(json.dumps(p["keys"], sort_keys=True))
            continue
        for key, value, non_numeric in p["cells"]:
            cell = dict(zip(dims, key, strict=False))
            group = {d: cell[d] for d in group_dims if d in cell}
            gkey = (p["eval"], json.dumps(group, sort_keys=True))
            score = out.setdefault(
                gkey, Score(p["eval"], p["job_id"], group, [], 0, p["threshold"])
            )
            if (p["eval"], tuple(key)) in seen:
                continue
            seen.add((p["eval"], tuple(key)))
            if value is not None:
                score.values.append(value)
            elif non_numeric:
                score.non_numeric += 1
    for gkey, items in missing_items.items():
        out[gkey].missing = len(items)
    return list(out.values())


def job_summary(store: Any, job_id: str) -> dict[str, Any]:
    """What the summary and the report say of one job, read from the store."""
    from fxtr.report import cost_of_invocations, load_job

    view = load_job(store, job_id)
    invocations = list(view.invocations.values())
    return {
        "view": view,
        "record": view.record,
        "invocations": invocations,
        "attempt": view.attempt,
        "cost": cost_of_invocations(invocations),
    }


def report_json(jobs: dict[str, dict[str, Any]], all_scores: list[Score]) -> dict[str, Any]:
    """The ``--fxtr-report`` document."""
    from fxtr.report import job_report

    return {
        "jobs": [
            job_report(info["view"], [s.to_json() for s in all_scores if s.job_id == job_id])
            for job_id, info in jobs.items()
        ]
    }


def write_report(path: Path, document: dict[str, Any]) -> None:
    """Write the report, creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")


def render(tr: Any, jobs: dict[str, dict[str, Any]], all_scores: list[Score], verbose: int) -> None:
    """Write the ``fxtr summary`` section through the terminal reporter."""
    from tabulate import tabulate

    from fxtr.report import format_usd

    tr.section("fxtr summary", sep="=")
    for job_id, info in jobs.items():
        record, invocations, attempt = info["record"], info["invocations"], info["attempt"]
        tr.write_line(
            f"job {job_id} · {record['workflow']} · attempt {attempt.get('attempt')} · "
            f"{attempt.get('status')}"
            + (
                f" · commit {record['commit'][:10]}" + (" (dirty)" if record.get("dirty") else "")
                if record.get("commit")
                else ""
            )
        )
        rows = defaultdict(Counter)
        seconds: dict[str, float] = defaultdict(float)
        for inv in invocations:
            row = rows[inv["step"]]
            row[inv["status"]] += 1
            row[
                "cached"
                if inv.get("from_cache")
                else ("ran" if inv.get("started_at") else "not run")
            ] += 1
            if inv.get("started_at") and inv.get("ended_at") and not inv.get("from_cache"):
                seconds[inv["step"]] += inv["ended_at"] - inv["started_at"]
        table = [
            [
                step,
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
        tr.write_line(
            tabulate(
                table,
                disable_numparse=True,
                headers=[
                    "step",
                    "invocations",
                    "ok",
                    "failed",
                    "skipped",
                    "review",
                    "ran",
                    "cached",
                    "time",
                ],
            )
        )
        cost = info["cost"]
        if cost["by_model"]:
            tr.write_line("")
            table = [
                [
                    m,
                    c["calls"],
                    c["input_tokens"],
                    c["output_tokens"],
                    format_usd(c["usd"]),
                    format_usd(c["saved_usd"]),
                ]
                for m, c in sorted(cost["by_model"].items())
            ]
            table.append(
                [
                    "total",
                    cost["calls"],
                    cost["input_tokens"],
                    cost["output_tokens"],
                    format_usd(cost["usd"]),
                    format_usd(cost["saved_usd"]),
                ]
            )
            tr.write_line(
                tabulate(
                    table,
                    disable_numparse=True,
                    headers=[
                        "model",
                        "calls",
                        "input tokens",
                        "output tokens",
                        "cost",
                        "saved by cache",
                    ],
                )
            )
        failed = [i for i in invocations if i["status"] == "failed"]
        review = [i for i in invocations if i["status"] == "needs_review"]
        if failed or review:
            tr.write_line("")
            by_reason: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for inv in failed:
                by_reason[inv.get("reason") or "unknown"].append(inv)
            if review:
                by_reason["needs_review"] = review
            table = [
                [reason, len(invs), invs[0]["address"], _short(invs[0].get("error"), 70)]
                for reason, invs in sorted(by_reason.items())
            ]
            tr.write_line(
                tabulate(
                    table, disable_numparse=True, headers=["reason", "count", "example", "error"]
                )
            )
            if verbose > 0:
                for inv in failed + review:
                    tr.write_line(f"  {inv['status']} {inv['address']}: {inv.get('error')}")
            if review:
                tr.write_line(
                    "  cached results came from other inputs or code; rerun with "
                    "--fxtr-cache-conflict=overwrite to replace them"
                )
        noticed = [i for i in invocations if i.get("warnings")]
        if noticed:
            tr.write_line("")
            tr.write_line(
                f"hermeticity: {len(noticed)} invocation(s) touched local state; e.g. "
                f"{noticed[0]['address']}: {noticed[0]['warnings'][0]}"
            )
            if verbose > 0:
                for inv in noticed[1:]:
                    tr.write_line(f"  {inv['address']}: {'; '.join(inv['warnings'])}")
        job_scores = [s for s in all_scores if s.job_id == job_id]
        if job_scores:
            tr.write_line("")
            table = []
            for s in job_scores:
                ci = (
                    f"[{s.mean - 1.96 * s.stderr:.3f}, {s.mean + 1.96 * s.stderr:.3f}]"
                    if s.mean is not None and s.stderr is not None
                    else "-"
                )
                table.append(
                    [
                        ", ".join(f"{k}={v}" for k, v in s.group.items()) or "(all)",
                        "-" if s.mean is None else f"{s.mean:.3f}",
                        "-" if s.stderr is None else f"±{s.stderr:.3f}",
                        ci,
                        s.n,
                        s.missing,
                        "-" if s.threshold is None else f"{s.threshold:g}",
                        "-" if s.threshold is None else ("pass" if s.passed else "FAIL"),
                    ]
                )
            tr.write_line(
                tabulate(
                    table,
                    disable_numparse=True,
                    headers=[
                        "group",
                        "mean",
                        "stderr",
                        "95% CI",
                        "n",
                        "missing",
                        "threshold",
                        "gate",
                    ],
                )
            )
        tr.write_line("")
    failing = [s for s in all_scores if not s.passed]
    for s in failing:
        group = ", ".join(f"{k}={v}" for k, v in s.group.items()) or "all cases"
        tr.write_line(
            f"fxtr: score gate failed for {s.eval} ({group}): {s.why()} "
            f"(mean={'-' if s.mean is None else f'{s.mean:.4g}'}, missing={s.missing}, "
            f"threshold={s.threshold:g})",
            red=True,
            bold=True,
        )


def _short(text: str | None, width: int) -> str:
    text = (text or "").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"
