"""Naming jobs and finding the store: what ``fxtr``, the viewer and the plugin accept as a JOB.

A job is named by its full id, a unique prefix of it, or ``latest`` (the newest job, by the
time it was created). Listing costs one read per job record, never a scan of the cache.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fxtr.store import Store

log = logging.getLogger("fxtr.report")

STORE_DIR = ".fxtr"
"""The name of the store directory that ``find_store`` looks for."""
LATEST = "latest"
"""The job name that means the newest job."""
MAX_CANDIDATES = 10
"""Candidates listed when a prefix is ambiguous; the rest are counted."""


def find_store(start: str | os.PathLike[str] = ".") -> Path | None:
    """The nearest ``.fxtr`` directory in ``start`` or one of its parents.

    Args:
        start: where to begin looking (default: the working directory).

    Returns:
        The store's path, or ``None`` when no folder up to the file system's root has one.
    """
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        candidate = folder / STORE_DIR
        if candidate.is_dir():
            return candidate
    return None


def job_records(store: Store) -> Iterator[dict[str, Any]]:
    """Every readable job record; a damaged one is skipped with a warning, not raised."""
    try:
        for record in store.iter_jobs():
            if isinstance(record, dict) and isinstance(record.get("job_id"), str):
                yield record
            else:
                log.warning("skipped a job record without a job id in %s", store.path)
    except (ValueError, TypeError, KeyError) as exc:  # a damaged record ends the store's scan
        log.warning("stopped reading job records in %s at a damaged one: %s", store.path, exc)


def created_at(record: dict[str, Any]) -> float:
    """When a job was created (0 when the record does not say)."""
    value = record.get("created_at")
    return float(value) if isinstance(value, int | float) else 0.0


def newest_first(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Job records ordered newest first (ties by id, so the order is stable)."""
    return sorted(records, key=lambda r: (created_at(r), r["job_id"]), reverse=True)


def attempt_status(record: dict[str, Any]) -> str | None:
    """The status of a job's last attempt (``None`` when the record has none or is damaged).

    An attempt recorded ``running`` whose process is gone is ``interrupted`` (DESIGN §11).
    """
    attempts = record.get("attempts")
    if isinstance(attempts, list) and attempts and isinstance(attempts[-1], dict):
        return live_status(attempts[-1])
    return None


INTERRUPTED = "interrupted"
"""The status of an attempt whose process died before it ended (killed, the machine lost)."""


def live_status(attempt: dict[str, Any]) -> str | None:
    """An attempt's status as it is now: ``running`` only while its process lives.

    The record says ``running`` from the attempt's start until it ends; a process killed
    with SIGKILL never writes its end. On the host that ran it, a process that no longer
    exists (or whose pid now belongs to a later process) makes the attempt ``interrupted``.
    An attempt of another host, or one recorded without its process, stays ``running``.
    """
    status = attempt.get("status")
    if not isinstance(status, str):
        return None
    if status == "running" and _process_gone(attempt):
        return INTERRUPTED
    return status


def process_identity() -> dict[str, Any]:
    """This process as an attempt records it: ``host``, ``pid`` and ``pid_started``."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "pid_started": _started(os.getpid())}


def _started(pid: int) -> int | None:
    """When a process started (clock ticks since boot, from ``/proc``; ``None`` elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) "
    try:
        return int(fields[19])  # field 22, starttime
    except (IndexError, ValueError):
        return None


def _process_gone(attempt: dict[str, Any]) -> bool:
    pid, host = attempt.get("pid"), attempt.get("host")
    if not isinstance(pid, int) or host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists, owned by someone else
        pass
    started = attempt.get("pid_started")
    return started is not None and _started(pid) not in (None, started)


def eval_of(record: dict[str, Any]) -> str | None:
    """The eval a job ran for (``evaluation.eval`` of its record), if any."""
    evaluation = record.get("evaluation")
    if isinstance(evaluation, dict) and isinstance(evaluation.get("eval"), str):
        return str(evaluation["eval"])
    return None


def eval_name(record: dict[str, Any]) -> str | None:
    """The eval a job was launched for.

    Its evaluation's, else the pytest node id it was launched with: a job interrupted
    before pytest scored it keeps its name.
    """
    named = eval_of(record)
    if named is not None:
        return named
    origin = record.get("origin")
    if isinstance(origin, dict) and origin.get("kind") == "pytest":
        nodeid = origin.get("nodeid")
        return nodeid if isinstance(nodeid, str) else None
    return None


def resume_command(record: dict[str, Any]) -> str:
    """What continues a job: ``pytest --fxtr-resume NODEID`` for an eval, else ``fxtr resume``."""
    import shlex

    job = f"fxtr resume {record.get('job_id')}"
    origin = record.get("origin")
    if isinstance(origin, dict) and origin.get("kind") == "pytest" and origin.get("nodeid"):
        return f"pytest --fxtr-resume {shlex.quote(str(origin['nodeid']))} (or {job})"
    return job


def interrupted_lines(record: dict[str, Any]) -> list[str]:
    """For a job whose last attempt was interrupted: what was running, and how to resume."""
    attempts = record.get("attempts")
    last = attempts[-1] if isinstance(attempts, list) and attempts else None
    if not isinstance(last, dict) or live_status(last) != INTERRUPTED:
        return []
    running = last.get("in_flight")
    lines = [f"interrupted: attempt {last.get('attempt')} stopped before it ended"]
    if isinstance(running, list) and running:
        shown = ", ".join(str(a) for a in running[:5])
        more = f" and {len(running) - 5} more" if len(running) > 5 else ""
        lines[0] += f" with {len(running)} invocation(s) running: {shown}{more}"
    lines.append(f"resume it: {resume_command(record)}")
    return lines


def job_title(record: dict[str, Any]) -> str:
    """How every view names a job: its eval first, its workflow second (DESIGN §11).

    ``evals/test_qa.py::test_qa · fxtr.evaluate`` for an eval's job (several evals share
    the kit's ``fxtr.evaluate``, so the workflow alone names none of them); the workflow
    alone for a job launched with ``fxtr.run``.
    """
    workflow = str(record.get("workflow") or "?")
    evaluation = eval_name(record)
    return workflow if evaluation is None else f"{evaluation} · {workflow}"


def _describe(record: dict[str, Any]) -> str:
    when = created_at(record)
    stamp = dt.datetime.fromtimestamp(when).isoformat(timespec="seconds") if when else "?"
    return f"{record['job_id']} ({record.get('workflow') or '?'}, {stamp})"


def resolve_job(
    store: Store,
    ref: str,
    *,
    eval_key: str | None = None,
    records: list[dict[str, Any]] | None = None,
) -> str:
    """The id of the job that ``ref`` names: a full id, a unique prefix, or ``latest``.

    Args:
        store: the store holding the jobs.
        ref: the name given by the user.
        eval_key: with ``latest``, the newest job of this eval (``evaluation.eval`` of the
            record, e.g. ``evals/test_qa.py::test_qa``) instead of the newest job.
        records: the store's job records, when the caller has just read them.

    Returns:
        The full job id.

    Raises:
        KeyError: no job matches (naming the ref and how to list jobs), or a prefix matches
            several jobs (listing the candidates).
    """
    where = f"the store at {store.path}"
    if records is None and ref != LATEST and ref and store.has_job(ref):
        return ref
    if records is None:
        records = list(job_records(store))
    if ref == LATEST:
        records = [r for r in records if eval_key is None or eval_of(r) == eval_key]
        if not records:
            of = f" of eval {eval_key!r}" if eval_key is not None else ""
            msg = f"No job{of} in {where}, so 'latest' names nothing. Run a job first."
            raise KeyError(msg)
        return str(newest_first(records)[0]["job_id"])
    if not ref:
        msg = f"An empty job name matches nothing in {where}. `fxtr jobs` lists the jobs."
        raise KeyError(msg)
    if any(r["job_id"] == ref for r in records):
        return ref
    matches = newest_first([r for r in records if r["job_id"].startswith(ref)])
    if len(matches) == 1:
        return str(matches[0]["job_id"])
    if not matches:
        msg = (
            f"No job {ref!r} in {where}: no job id starts with it. `fxtr jobs` lists the jobs "
            "(a full id, a unique prefix or 'latest' names one)."
        )
        raise KeyError(msg)
    listed = ", ".join(_describe(r) for r in matches[:MAX_CANDIDATES])
    more = f" and {len(matches) - MAX_CANDIDATES} more" if len(matches) > MAX_CANDIDATES else ""
    msg = (
        f"Job name {ref!r} is ambiguous in {where}: {len(matches)} jobs start with it: "
        f"{listed}{more}. Give more characters of the id."
    )
    raise KeyError(msg)
