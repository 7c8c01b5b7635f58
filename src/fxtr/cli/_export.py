"""``fxtr view --export``: the viewer as one self-contained HTML file, offline.

One job, or every job of a pytest session (``latest`` names the newest job's session: the CI
artifact of a run of several evals shows each of them). CSS, JS and data are inline, a CSP
blocks the network, and each invocation's and cell's details sit in a JSON block of their
own, parsed only when opened.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from fxtr.cli._server import Viewer, invocation_rows, safe_json, static_text, with_trajectories
from fxtr.report import invocation_detail, job_records, resolve_job
from fxtr.report._evals import cell_detail, evaluation_of, result_matrix
from fxtr.store import Store

LATEST = "latest"


def session_of(record: dict[str, Any]) -> str | None:
    """The pytest session that last ran a job (its last attempt's ``run``), if one did."""
    attempts = record.get("attempts") or []
    last = attempts[-1] if attempts and isinstance(attempts[-1], dict) else {}
    run = last.get("run")
    return str(run) if run else None


def jobs_to_export(store: Store, ref: str) -> list[str]:
    """The jobs ``fxtr view --export REF`` writes, oldest first.

    A job id or prefix names that job alone. ``latest`` names the newest job and, when a
    pytest session ran it, every job that session ran (each eval of the run).

    Raises:
        KeyError: no job matches ``ref`` (the message says how to list jobs).
    """
    if ref != LATEST:
        return [resolve_job(store, ref)]
    records = list(job_records(store))
    job_id = resolve_job(store, ref, records=records)
    newest = next(r for r in records if r["job_id"] == job_id)
    session = session_of(newest)
    if session is None:
        return [job_id]
    mine = [r for r in records if session_of(r) == session]
    mine.sort(key=lambda r: (r.get("created_at") or 0.0, r["job_id"]))
    return [r["job_id"] for r in mine]


def export_page(store: Store, job_ids: list[str]) -> str:
    """One HTML file of the jobs.

    One job opens on its page; several open on the list of jobs, each linking to its page.
    """
    viewer = Viewer(store)
    data: dict[str, Any] = {
        "mode": "export", "jobs": [], "job": {}, "graph": {}, "matrix": {},
        "invocations": {}, "index": {},
    }
    several = len(job_ids) > 1
    if several:
        data["cell_prefix"] = {}  # each job's cell blocks: cell-{prefix}{index}
    details: list[str] = []
    for j, job_id in enumerate(job_ids):
        prefix = f"{j}-" if several else ""
        if several:
            data["cell_prefix"][job_id] = prefix
        _add_job(store, viewer, job_id, prefix, data, details)
    return _page(data, details)


def _add_job(
    store: Store,
    viewer: Viewer,
    job_id: str,
    prefix: str,
    data: dict[str, Any],
    details: list[str],
) -> None:
    view = viewer.view(job_id)
    graph = viewer.graph(job_id)
    index: dict[str, str] = {}
    for i, address in enumerate(sorted(view.invocations)):
        block_id = f"inv-{prefix}{i}"
        index[address] = block_id
        detail = invocation_detail(store, view, address)
        details.append(
            f'<script type="application/json" id="{block_id}">{safe_json(detail)}</script>'
        )
    rows = invocation_rows(view, None, None, None, 0, len(view.invocations))["items"]
    matrix = None
    evaluation = evaluation_of(view.record)
    if evaluation is not None:
        table = viewer.table(job_id)
        matrix = result_matrix(evaluation, limit=len(evaluation["cells"]), tables=(table, None))
        matrix["job_id"] = job_id
        origins: dict[str, Any] = {}  # the jobs that ran cached cells, read once
        for i in range(len(evaluation["cells"])):
            cell = cell_detail(
                store, job_id, evaluation, i, view.invocations, table=table, origins=origins
            )
            cell = with_trajectories(store, cell, view.invocations)
            details.append(
                f'<script type="application/json" id="cell-{prefix}{i}">{safe_json(cell)}'
                "</script>"
            )
    data["jobs"].append(graph["row"])
    data["job"][job_id] = viewer.job(job_id)
    data["graph"][job_id] = graph
    data["matrix"][job_id] = matrix
    data["invocations"][job_id] = rows
    data["index"][job_id] = index


def _page(data: dict[str, Any], details: list[str]) -> str:
    script = static_text("agents.js") + "\n" + static_text("app.js")
    style = static_text("app.css") + "\n" + static_text("agents.css")
    script_hash = hashlib.sha256(script.encode()).digest()
    style_hash = hashlib.sha256(style.encode()).digest()
    csp = (
        "default-src 'none'; img-src data:; "
        f"script-src 'sha256-{base64.b64encode(script_hash).decode()}'; "
        f"style-src 'sha256-{base64.b64encode(style_hash).decode()}'; base-uri 'none'"
    )
    body = static_text("index.html")
    head, _, tail = body.partition("<!--app-->")
    head = head.replace('<link rel="stylesheet" href="/app.css">', f"<style>{style}</style>")
    head = head.replace('<link rel="stylesheet" href="/agents.css">', "")
    return (
        head.replace(
            "<head>", f'<head>\n<meta http-equiv="Content-Security-Policy" content="{csp}">', 1
        )
        + f'<script type="application/json" id="fxtr-data">{safe_json(data)}</script>\n'
        + "\n".join(details)
        + f"\n<script>{script}</script>"
        + tail.replace('<script src="/app.js"></script>', "").replace(
            '<script src="/agents.js"></script>', ""
        )
    )
