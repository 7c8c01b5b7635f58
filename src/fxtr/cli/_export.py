"""``fxtr view --export``: which jobs, and the HTML page that holds them.

One job, or every job of a pytest session (``latest`` names the newest job's session: the CI
artifact of a run of several evals shows each of them). ``fxtr.cli._server.export_html``
gathers the jobs' data; :func:`page` makes the self-contained file.
"""

from __future__ import annotations

import base64
import hashlib
from importlib import resources
from typing import Any

from fxtr.report import job_records, resolve_job
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


def page(data: str, details: list[str]) -> str:
    """The HTML file of an export.

    The app's script and style inline under a CSP that allows only them, the data
    (``safe_json`` text) and the details blocks.
    """
    script = _static("agents.js") + "\n" + _static("app.js")
    style = _static("app.css") + "\n" + _static("agents.css")
    script_hash = hashlib.sha256(script.encode()).digest()
    style_hash = hashlib.sha256(style.encode()).digest()
    csp = (
        "default-src 'none'; img-src data:; "
        f"script-src 'sha256-{base64.b64encode(script_hash).decode()}'; "
        f"style-src 'sha256-{base64.b64encode(style_hash).decode()}'; base-uri 'none'"
    )
    body = _static("index.html")
    head, _, tail = body.partition("<!--app-->")
    head = head.replace('<link rel="stylesheet" href="/app.css">', f"<style>{style}</style>")
    head = head.replace('<link rel="stylesheet" href="/agents.css">', "")
    return (
        head.replace(
            "<head>", f'<head>\n<meta http-equiv="Content-Security-Policy" content="{csp}">', 1
        )
        + f'<script type="application/json" id="fxtr-data">{data}</script>\n'
        + "\n".join(details)
        + f"\n<script>{script}</script>"
        + tail.replace('<script src="/app.js"></script>', "").replace(
            '<script src="/agents.js"></script>', ""
        )
    )


def _static(name: str) -> str:
    return resources.files("fxtr.cli").joinpath("static", name).read_text(encoding="utf-8")
