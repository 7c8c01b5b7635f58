"""The viewer's server: a few read-only JSON routes and the static app, on loopback.

Security: binds 127.0.0.1 unless told otherwise; refuses a ``Host`` that is not a loopback
name (DNS rebinding); GET and HEAD only; no CORS headers; a Content-Security-Policy that
allows nothing but this origin; static files from a fixed name map. Records are data: the
page puts them in the DOM with ``textContent``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from fxtr.report import (
    invocation_detail,
    job_row,
    load_job,
    operation_graph,
    task_view,
)
from fxtr.store import Store

log = logging.getLogger("fxtr.viewer")

STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/app.css": ("app.css", "text/css; charset=utf-8"),
}
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}
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
    """JSON that can sit inside a ``<script>`` block: ``<``, ``>``, ``&`` escaped."""
    text = json.dumps(data, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def invocation_rows(
    view: Any, op: str | None, status: str | None, query: str | None, offset: int, limit: int
) -> dict[str, Any]:
    """One page of a job's invocations, filtered by operation, status and text."""
    from fxtr.report._views import strip_keys

    rows = []
    for address, inv in sorted(view.invocations.items()):
        if op and strip_keys(address) != op:
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


class Viewer:
    """What the routes read: the store, with jobs loaded on demand."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def jobs(self) -> list[dict[str, Any]]:
        rows = [job_row(load_job(self.store, r["job_id"])) for r in self.store.iter_jobs()]
        return sorted(rows, key=lambda r: r["started"] or "", reverse=True)

    def job(self, job_id: str) -> dict[str, Any]:
        view = load_job(self.store, job_id)
        record = view.record
        return {
            "row": job_row(view),
            "graph": operation_graph(view),
            "record": {
                k: record.get(k)
                for k in ("workflow", "workflow_path", "commit", "dirty", "attempts", "created_at")
            },
            "workflows": view.workflows,
        }

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
            KeyError: nothing at that path.
        """

        def one(name: str) -> str | None:
            return query.get(name, [None])[0]

        if path == "/api/jobs":
            return self.jobs()
        if path == "/api/tasks":
            return self.tasks()
        match = re.fullmatch(r"/api/tasks/([^/]+)", path)
        if match:
            return task_view(self.store, unquote(match.group(1)))
        match = re.fullmatch(r"/api/jobs/([^/]+)(/invocations|/invocation)?", path)
        if match is None:
            msg = f"no route {path!r}"
            raise KeyError(msg)
        job_id, tail = unquote(match.group(1)), match.group(2)
        if tail is None:
            return self.job(job_id)
        view = load_job(self.store, job_id)
        if tail == "/invocation":
            return invocation_detail(self.store, view, one("address") or "")
        offset = int(one("offset") or 0)
        limit = min(int(one("limit") or PAGE), 1000)
        return invocation_rows(view, one("op"), one("status"), one("q"), offset, limit)


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
            body = json.dumps({"error": message}).encode()
            self._send(status, body, "application/json")

        def _host_ok(self) -> bool:
            host = (self.headers.get("Host") or "").strip().lower()
            name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]")[0] + "]"
            return name in allowed_hosts

        def do_GET(self) -> None:
            if not self._host_ok():
                self._error(HTTPStatus.FORBIDDEN, "Host not allowed")
                return
            url = urlsplit(self.path)
            if url.path in STATIC:
                name, content_type = STATIC[url.path]
                self._send(HTTPStatus.OK, static_text(name).encode(), content_type)
                return
            if not url.path.startswith("/api/"):
                self._error(HTTPStatus.NOT_FOUND, "not found")
                return
            try:
                data = viewer.route(url.path, parse_qs(url.query))
            except KeyError as exc:
                self._error(HTTPStatus.NOT_FOUND, str(exc.args[0]) if exc.args else "not found")
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
        allowed.add(host.lower())
    server = ThreadingHTTPServer((host, port), make_handler(Viewer(store), allowed))
    thread = threading.Thread(target=server.serve_forever, name="fxtr-viewer", daemon=True)
    thread.start()
    return server, thread


def export_html(store: Store, job_id: str) -> str:
    """One self-contained HTML file showing a job offline.

    CSS, JS and data are inline, a CSP blocks the network, and each invocation's details sit
    in a JSON block of their own, parsed only when opened.
    """
    viewer = Viewer(store)
    view = load_job(store, job_id)
    job = viewer.job(job_id)
    details = []
    index: dict[str, str] = {}
    for i, address in enumerate(sorted(view.invocations)):
        block_id = f"inv-{i}"
        index[address] = block_id
        detail = invocation_detail(store, view, address)
        details.append(
            f'<script type="application/json" id="{block_id}">{safe_json(detail)}</script>'
        )
    rows = invocation_rows(view, None, None, None, 0, len(view.invocations))["items"]
    data = {
        "mode": "export",
        "jobs": [job["row"]],
        "job": {job_id: job},
        "invocations": {job_id: rows},
        "index": {job_id: index},
    }
    script = static_text("app.js")
    style = static_text("app.css")
    script_hash = hashlib.sha256(script.encode()).digest()
    style_hash = hashlib.sha256(style.encode()).digest()
    import base64

    csp = (
        "default-src 'none'; img-src data:; "
        f"script-src 'sha256-{base64.b64encode(script_hash).decode()}'; "
        f"style-src 'sha256-{base64.b64encode(style_hash).decode()}'; base-uri 'none'"
    )
    body = static_text("index.html")
    head, _, tail = body.partition("<!--app-->")
    head = head.replace('<link rel="stylesheet" href="app.css">', f"<style>{style}</style>")
    return (
        head.replace(
            "<head>", f'<head>\n<meta http-equiv="Content-Security-Policy" content="{csp}">', 1
        )
        + f'<script type="application/json" id="fxtr-data">{safe_json(data)}</script>\n'
        + "\n".join(details)
        + f"\n<script>{script}</script>"
        + tail.replace('<script src="app.js"></script>', "")
    )
