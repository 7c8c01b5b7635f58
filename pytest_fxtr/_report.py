"""What the summary and the ``--fxtr-report`` JSON read of each job, and writing the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any


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
        "agents": _agent_rows(store, invocations),
        "sandboxes": _sandbox_rows(store, invocations),
    }


def _agent_rows(store: Any, invocations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model, the agent eval's trajectories (none for a job without agents)."""
    if not any(inv.get("step") == "fxtr.agents.trajectory" for inv in invocations):
        return []
    from fxtr.agents._report import agent_rows

    return agent_rows(store, invocations)


def _sandbox_rows(store: Any, invocations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model, the sandbox calls that timed out or failed (none without a sandbox)."""
    if not any(str(inv.get("step")).startswith("fxtr.sandbox.") for inv in invocations):
        return []
    from fxtr.sandbox import sandbox_rows

    return sandbox_rows(store, invocations)


def report_json(
    jobs: dict[str, dict[str, Any]], evaluations: list[dict[str, Any]]
) -> dict[str, Any]:
    """The ``--fxtr-report`` document: each job with its eval, score groups and cells.

    The cells make a report file usable as a baseline (``--fxtr-baseline report.json``).
    """
    from fxtr.report._export import report_entry

    by_job = {e["job_id"]: e for e in evaluations if e.get("job_id")}
    return {
        "jobs": [report_entry(info["view"], by_job.get(job_id)) for job_id, info in jobs.items()]
    }


def write_report(path: Path, document: dict[str, Any]) -> None:
    """Write the report, creating its folder."""
    from fxtr.report._redaction import redacted_json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(redacted_json(document, indent=2) + "\n")


def write_interrupted(tr: Any, store_path: Any, job_ids: list[str]) -> None:
    """Each job a Ctrl-C interrupted: its eval's name, what was running, the resume command."""
    if not job_ids:
        return
    from fxtr.report._names import interrupted_lines, job_title
    from fxtr.store import open_store

    try:
        store = open_store(store_path)
        records = [store.get_job(job_id) for job_id in job_ids if store.has_job(job_id)]
    except Exception:  # the store's own failure was reported where it happened
        return
    for record in records:
        lines = interrupted_lines(record)
        if lines:
            tr.write_line(f"fxtr: {job_title(record)} · job {record['job_id']}", yellow=True)
            for text in lines:
                tr.write_line(f"  {text}", yellow=True)
