"""The viewer's server: a few read-only JSON routes and the static app, on loopback.

Security: binds 127.0.0.1 unless told otherwise; refuses a ``Host`` that is not a loopback
name (DNS rebinding); GET and HEAD only; no CORS headers; a Content-Security-Policy that
allows nothing but this origin; static files from a fixed name map. Records are data: the
page puts them in the DOM with ``textContent``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from fxtr.cli._compare import flipped_of
from fxtr.report import (
    JobView,
    attempt_status,
    invocation_detail,
    job_records,
    job_row,
    load_job,
    newest_first,
    operation_graph,
    resolve_job,
    task_view,
)
from fxtr.report._evals import (
    MATRIX_PAGE,
    cell_detail,
    cell_table,
    compare_evaluations,
    evaluation_of,
    evaluation_summary,
    gate_label,
    result_matrix,
)
from fxtr.report._redaction import redacted_json
from fxtr.store import Store

log = logging.getLogger("fxtr.viewer")

STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/app.css": ("app.css", "text/css; charset=utf-8"),
    "/agents.js": ("agents.js", "text/javascript; charset=utf-8"),
    "/agents.css": ("agents.css", "text/css; charset=utf-8"),
}
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "[::1]"}
HOST = re.compile(r"(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::\d{1,5})?")
"""A Host header: a name or a bracketed IPv6 address and an optional port; no user info."""
PAGES = re.compile(r"/(job|compare|task)/[^?#]*")
"""Page paths the app routes itself (``/job/ID``, ``/compare/A/B``): served the app."""
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE = 200
"""Rows per page of invocations."""


def static_text(name: str) -> str:
    """A file of the viewer app, shipped in the package."""
    return resources.files("fxtr.cli").joinpath("static", name).read_text(encoding="utf-8")


def safe_json(data: Any) -> str:
    """JSON that can sit inside a ``<script>`` block: ``<``, ``>``, ``&`` escaped.

    Every response of the viewer and every data block of the HTML export is written here,
    with credentials redacted (:func:`fxtr.report._redaction.redacted_json`).
    """
    text = redacted_json(data)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def invocation_rows(
    view: Any, op: str | None, status: str | None, query: str | None, offset: int, limit: int
) -> dict[str, Any]:
    """One page of a job's invocations, filtered by operation, status and text."""
    from fxtr.tracing._jobgraph import strip_keys

    rows = []
    under = f"{op}/"  # a workflow's node (an agent's trajectories) holds the steps under it
    # the failed (or skipped, or in review) ones come from the status index: the first
    # screen of a large job with failures reads no succeeded record
    source = view.unfinished() if status and status != "succeeded" else view.invocations
    for address, inv in sorted(source.items()):
        if op and (key := strip_keys(address)) != op and not key.startswith(under):
            continue
        if status and inv["status"] != status:
            continue
        if query and query.lower() not in address.lower():
            continue
        rows.append(
            {
                "address": address,
                "step": inv.get("step"),
                "status": inv["status"],
                "from_cache": bool(inv.get("from_cache")),
                "reason": inv.get("reason"),
                "error": (inv.get("error") or "")[:200],
            }
        )
    return {"total": len(rows), "offset": offset, "items": rows[offset : offset + limit]}


def with_trajectories(store: Store, detail: dict[str, Any], invocations: Any) -> dict[str, Any]:
    """An agent eval's cell gains its trajectories (drawn by agents.js)."""
    addresses = [inv["address"] for inv in detail.get("invocations") or []]
    if any(str(inv.get("step")).startswith("fxtr.agents.") for inv in detail["invocations"]):
        from fxtr.agents._report import cell_trajectories
        from fxtr.sandbox import sandbox_views  # a sandbox agent's calls, layers and tree

        detail["trajectories"] = cell_trajectories(store, addresses, invocations)
        sandbox_views(store, detail["trajectories"], invocations)
    return detail


def int_param(query: dict[str, list[str]], name: str, default: int, maximum: int) -> int:
    """A non-negative whole-number query parameter, capped at ``maximum``.

    Raises:
        ValueError: the value is not a whole number or is negative (a 400).
    """
    raw = query.get(name, [None])[0]
    if raw is None or raw == "":
        return default
    if not re.fullmatch(r"\d{1,9}", raw):
        msg = f"{name} must be a whole number of at least 0, got {raw!r}."
        raise ValueError(msg)
    return min(int(raw), maximum)


CACHE_SECONDS = 5.0
"""How long a job record read from the store is reused by the routes (a page's requests)."""
JOBS_LISTED = 200
"""Jobs the jobs page lists (the newest); ``/api/jobs?limit=N`` asks for more."""
CACHED_JOBS = 4
"""Jobs whose record and invocations the viewer keeps in memory at once."""


class DamagedRecordError(Exception):
    """A job record the store holds but cannot read (a 500 naming the job)."""


class Viewer:
    """What the routes read: the store, with jobs loaded on demand and kept briefly."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._records: dict[str, tuple[float, dict[str, Any]]] = {}
        self._views: dict[str, tuple[Any, JobView]] = {}
        self._tables: dict[str, tuple[Any, dict[str, Any]]] = {}
        self._listing: tuple[float, list[dict[str, Any]]] | None = None
        self._rows: dict[str, tuple[Any, dict[str, Any]]] = {}

    # loading, with a small cache: a 10,000-case job's record is megabytes of JSON ----------
    def resolve(self, ref: str) -> str:
        """The job a URL names; ``latest`` and prefixes read the records once for the page."""
        if ref != "latest" and self.store.has_job(ref):
            return ref
        now = time.monotonic()
        with self._lock:
            listing = self._listing
        if listing is None or now - listing[0] >= CACHE_SECONDS:
            listing = (now, list(job_records(self.store)))
            with self._lock:
                self._listing = listing
        job_id = resolve_job(self.store, ref, records=listing[1])
        record = next(r for r in listing[1] if r["job_id"] == job_id)
        with self._lock:
            self._records.setdefault(job_id, (listing[0], record))
            _trim(self._records)
        return job_id

    def record(self, job_id: str) -> dict[str, Any]:
        now = time.monotonic()
        with self._lock:
            hit = self._records.get(job_id)
        if hit is not None and now - hit[0] < CACHE_SECONDS:
            return hit[1]
        try:
            record = self.store.get_job(job_id)
        except ValueError as exc:
            msg = (
                f"The record of job {job_id} in {self.store.path} is damaged ({exc}); the other "
                "jobs are not affected. Remove it, or restore the store from a backup."
            )
            raise DamagedRecordError(msg) from None
        with self._lock:
            self._records[job_id] = (now, record)
            _trim(self._records)
        return record

    def view(self, job_id: str) -> JobView:
        record = self.record(job_id)
        stamp = _stamp(record)
        with self._lock:
            hit = self._views.get(job_id)
        if hit is not None and hit[0] == stamp and stamp is not None:
            return hit[1]
        view = load_job(self.store, job_id)
        with self._lock:
            self._views[job_id] = (stamp, view)
            _trim(self._views)
        return view

    def table(self, job_id: str) -> dict[str, Any]:
        """The scored cells of an eval job (computed once per finished attempt)."""
        record = self.record(job_id)
        stamp = _stamp(record)
        with self._lock:
            hit = self._tables.get(job_id)
        if hit is not None and hit[0] == stamp and stamp is not None:
            return hit[1]
        table = cell_table(self.evaluation(job_id))
        with self._lock:
            self._tables[job_id] = (stamp, table)
            _trim(self._tables)
        return table

    def evaluation(self, job_id: str) -> dict[str, Any]:
        evaluation = evaluation_of(self.record(job_id))
        if evaluation is None:
            msg = f"Job {job_id} is not an eval job: it has no results (no evaluation field)."
            raise KeyError(msg)
        return evaluation

    # the routes' data ------------------------------------------------------------------
    def jobs(self, limit: int = JOBS_LISTED) -> list[dict[str, Any]]:
        """The newest jobs' rows (counts from their invocations, kept per finished attempt)."""
        rows = []
        for record in newest_first(list(job_records(self.store)))[:limit]:
            try:
                rows.append(self._row(record))
            except (KeyError, ValueError, TypeError) as exc:  # one damaged job hides no other
                log.warning("skipped job %s: %s", record.get("job_id"), exc)
                rows.append(
                    {
                        "job_id": record["job_id"],
                        "workflow": record.get("workflow"),
                        "status": "damaged",
                        "error": f"{type(exc).__name__}: {exc}",
                    }
                )
        return rows

    def _row(self, record: dict[str, Any]) -> dict[str, Any]:
        job_id, stamp = record["job_id"], _stamp(record)
        with self._lock:
            hit = self._rows.get(job_id)
        if hit is not None and hit[0] == stamp and stamp is not None:
            return hit[1]
        row = job_row(load_job(self.store, job_id))
        with self._lock:
            self._rows[job_id] = (stamp, row)
        return row

    def job(self, job_id: str, query: dict[str, list[str]] | None = None) -> dict[str, Any]:
        """The head of a job's page: the record's facts and, for an eval, its results summary.

        With ``?matrix=1``, an eval job's head carries the first page of its results too
        (compared with its baseline when that is in the store): the page's first screen in one
        request.
        """
        record = self.record(job_id)
        evaluation = evaluation_of(record)
        first = None
        if query and _one(query, "matrix") and evaluation is not None:
            first = self.matrix(job_id, {"compare": ["baseline"], **query})
        return {
            "matrix": first,
            "job_id": job_id,
            "record": {k: record.get(k) for k in RECORD_KEYS},
            "status": attempt_status(record),
            "gate": gate_label(record),
            "evaluation": evaluation_summary(evaluation) if evaluation else None,
        }

    def graph(self, job_id: str) -> dict[str, Any]:
        view = self.view(job_id)
        return {"row": job_row(view), "graph": operation_graph(view), "workflows": view.workflows}

    def matrix(self, job_id: str, query: dict[str, list[str]]) -> dict[str, Any]:
        evaluation = self.evaluation(job_id)
        compare = _one(query, "compare")
        baseline = baseline_id = None
        if compare == "baseline":  # the job's own baseline, when it is a job of this store
            recorded = evaluation.get("baseline") or {}
            known = recorded.get("source") == "store" and self.store.has_job(
                str(recorded.get("job_id"))
            )
            compare = str(recorded["job_id"]) if known else None
        if compare:
            baseline_id = self.resolve(compare)
            baseline = self.evaluation(baseline_id)
        page = result_matrix(
            evaluation,
            baseline=baseline,
            tables=(self.table(job_id), self.table(baseline_id) if baseline_id else None),
            show=_one(query, "show") or None,
            query=_one(query, "q"),
            offset=int_param(query, "offset", 0, 10**9),
            limit=int_param(query, "limit", MATRIX_PAGE, 100_000),
        )
        page["job_id"] = job_id
        page["compare"] = baseline_id
        return page

    def cell(self, job_id: str, query: dict[str, list[str]]) -> dict[str, Any]:
        evaluation = self.evaluation(job_id)
        if not _one(query, "index"):
            msg = "a cell needs ?index=N (the cell's number in the job's results)."
            raise ValueError(msg)
        index = int_param(query, "index", 0, 10**9)
        invocations = self.view(job_id).invocations
        detail = cell_detail(
            self.store, job_id, evaluation, index, invocations, table=self.table(job_id)
        )
        return with_trajectories(self.store, detail, invocations)

    def compare(self, a: str, b: str, query: dict[str, list[str]]) -> dict[str, Any]:
        a_id, b_id = self.resolve(a), self.resolve(b)
        raw = _one(query, "margin") or "0"
        try:
            margin = float(raw)
        except ValueError:
            msg = f"margin must be a number, got {raw!r}."
            raise ValueError(msg) from None
        if not 0 <= margin < float("inf"):
            msg = f"margin must be a finite number of at least 0, got {raw!r}."
            raise ValueError(msg)
        a_eval, b_eval = self.evaluation(a_id), self.evaluation(b_id)
        if a_eval.get("eval") != b_eval.get("eval") and not _one(query, "any_eval"):
            msg = (
                f"Job {a_id} is of eval {a_eval.get('eval')} and job {b_id} of eval "
                f"{b_eval.get('eval')}: compare two jobs of one eval, or add ?any_eval=1 to "
                "pair their cases by key all the same."
            )
            raise ValueError(msg)
        groups = compare_evaluations(a_eval, b_eval, margin=margin)
        for row in groups:
            to_fail, to_pass = flipped_of(row)
            row["flipped"] = {"to_fail": to_fail, "to_pass": to_pass}
        return {"a": self.job(a_id), "b": self.job(b_id), "margin": margin, "groups": groups}

    def tasks(self) -> list[dict[str, Any]]:
        out = []
        for task_id in self.store.iter_tasks():
            try:
                view = task_view(self.store, task_id)
            except KeyError:
                continue
            out.append(
                {
                    "task_id": task_id,
                    "name": view["name"],
                    "status": view["status"],
                    "nodes": len(view["nodes"]),
                }
            )
        return out

    def route(self, path: str, query: dict[str, list[str]]) -> Any:
        """The JSON for an API path.

        Raises:
            KeyError: nothing at that path (a 404).
            ValueError: a bad parameter (a 400).
        """
        if path == "/api/jobs":
            return self.jobs(int_param(query, "limit", JOBS_LISTED, 100_000))
        if path == "/api/tasks":
            return self.tasks()
        match = re.fullmatch(r"/api/tasks/([^/]+)", path)
        if match:
            return task_view(self.store, unquote(match.group(1)))
        match = re.fullmatch(r"/api/compare/([^/]+)/([^/]+)", path)
        if match:
            return self.compare(unquote(match.group(1)), unquote(match.group(2)), query)
        match = re.fullmatch(
            r"/api/jobs/([^/]+)(/graph|/matrix|/cell|/invocations|/invocation)?", path
        )
        if match is None:
            msg = f"no route {path!r}"
            raise KeyError(msg)
        job_id, tail = self.resolve(unquote(match.group(1))), match.group(2)
        if tail is None:
            return self.job(job_id, query)
        if tail == "/graph":
            return self.graph(job_id)
        if tail == "/matrix":
            return self.matrix(job_id, query)
        if tail == "/cell":
            return self.cell(job_id, query)
        view = self.view(job_id)
        if tail == "/invocation":
            return invocation_detail(self.store, view, _one(query, "address") or "")
        offset = int_param(query, "offset", 0, 10**9)
        limit = int_param(query, "limit", PAGE, 1000)
        return invocation_rows(
            view, _one(query, "op"), _one(query, "status"), _one(query, "q"), offset, limit
        )


RECORD_KEYS = ("workflow", "workflow_path", "commit", "dirty", "attempts", "created_at")
"""The job record's fields the job page shows."""


def _one(query: dict[str, list[str]], name: str) -> str | None:
    return query.get(name, [None])[0]


def _stamp(record: dict[str, Any]) -> Any:
    """What identifies a finished attempt (``None`` while it runs: never cached)."""
    if attempt_status(record) in (None, "running"):
        return None
    attempts = record["attempts"]
    last = attempts[-1]
    return (len(attempts), last.get("status"), last.get("ended_at"))


def _trim(cache: dict[str, Any]) -> None:
    while len(cache) > CACHED_JOBS:
        cache.pop(next(iter(cache)))


def make_handler(viewer: Viewer, allowed_hosts: set[str]) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to a viewer."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "fxtr-viewer"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s - %s", self.address_string(), format % args)

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _error(self, status: int, message: str) -> None:
            body = safe_json({"error": message}).encode()
            self._send(status, body, "application/json")

        def send_error(
            self, code: int, message: str | None = None, explain: str | None = None
        ) -> None:
            """Send the standard library's own errors with the security headers too."""
            self.close_connection = True
            self._error(code, message or HTTPStatus(code).phrase)

        def _host_ok(self) -> bool:
            host = (self.headers.get("Host") or "").strip().lower()
            match = HOST.fullmatch(host)
            return match is not None and match.group(1) in allowed_hosts

        def do_GET(self) -> None:
            if not self._host_ok():
                self._error(
                    HTTPStatus.FORBIDDEN,
                    "Host not allowed: the viewer answers only to localhost, 127.0.0.1 and "
                    "[::1] (with an optional port, no user info)",
                )
                return
            url = urlsplit(self.path)
            if url.path in STATIC or PAGES.fullmatch(url.path):
                name, content_type = STATIC.get(url.path, STATIC["/"])
                self._send(HTTPStatus.OK, static_text(name).encode(), content_type)
                return
            if not url.path.startswith("/api/"):
                self._error(HTTPStatus.NOT_FOUND, f"nothing at {url.path!r}")
                return
            try:
                data = viewer.route(url.path, parse_qs(url.query, keep_blank_values=True))
            except KeyError as exc:
                self._error(HTTPStatus.NOT_FOUND, str(exc.args[0]) if exc.args else "not found")
                return
            except DamagedRecordError as exc:
                self._error(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc))
                return
            except ValueError as exc:
                self._error(HTTPStatus.BAD_REQUEST, str(exc))
                return
            self._send(HTTPStatus.OK, safe_json(data).encode(), "application/json")

        do_HEAD = do_GET

        def _refuse(self) -> None:
            self._error(HTTPStatus.METHOD_NOT_ALLOWED, "the viewer is read-only: GET and HEAD only")

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse

    return Handler


def serve(store: Store, host: str, port: int) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Start the viewer in a thread; the caller prints the URL and waits."""
    allowed = set(LOOPBACK_HOSTS)
    if host not in ("127.0.0.1", "localhost", "::1"):
        allowed.add(f"[{host.lower()}]" if ":" in host else host.lower())
    server = ThreadingHTTPServer((host, port), make_handler(Viewer(store), allowed))
    thread = threading.Thread(target=server.serve_forever, name="fxtr-viewer", daemon=True)
    thread.start()
    return server, thread


def export_html(store: Store, job_id: str | list[str]) -> str:
    """One self-contained HTML file showing a job offline, or several jobs (a pytest session's).

    CSS, JS and data are inline, a CSP blocks the network, and each invocation's and cell's
    details sit in a JSON block of their own, parsed only when opened. Several jobs open on
    their list, each linking to its page; each job's blocks have ids of their own.
    """
    job_ids = [job_id] if isinstance(job_id, str) else job_id
    viewer = Viewer(store)
    keys = ("job", "graph", "matrix", "invocations", "index")
    data: dict[str, Any] = {"mode": "export", "jobs": [], **{k: {} for k in keys}}
    if len(job_ids) > 1:
        data["cell_prefix"] = {j: f"{n}-" for n, j in enumerate(job_ids)}
    details: list[str] = []
    for job_id in job_ids:
        prefix = (data.get("cell_prefix") or {}).get(job_id, "")
        view = viewer.view(job_id)
        job_head = viewer.job(job_id)
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
            matrix = result_matrix(
                evaluation, limit=len(evaluation["cells"]), tables=(table, None)
            )
            matrix["job_id"] = job_id
            origins: dict[str, Any] = {}  # the jobs that ran cached cells, read once
            for i in range(len(evaluation["cells"])):
                cell = cell_detail(
                    store, job_id, evaluation, i, view.invocations, table=table, origins=origins
                )
                cell = with_trajectories(store, cell, view.invocations)
                details.append(
                    f'<script type="application/json" id="cell-{prefix}{i}">'
                    f"{safe_json(cell)}</script>"
                )
        data["jobs"].append(graph["row"])
        for key, value in zip(keys, (job_head, graph, matrix, rows, index), strict=True):
            data[key][job_id] = value
    from fxtr.cli._export import page

    return page(safe_json(data), details)
