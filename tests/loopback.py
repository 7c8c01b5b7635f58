"""Loopback HTTP servers on 127.0.0.1 that stand in for providers (the network boundary)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class CapacityServer:
    """An OpenAI-compatible chat server that admits ``capacity`` requests at once.

    A request beyond that is answered 429 at once (with ``Retry-After`` when given); an
    admitted one takes ``latency`` seconds and answers ``"ok"``. Counts everything.
    """

    def __init__(
        self, capacity: int = 8, latency: float = 0.02, retry_after: str | None = None
    ) -> None:
        self.capacity = capacity
        self.latency = latency
        self.retry_after = retry_after
        self.lock = threading.Lock()
        self.active = 0
        self.peak = 0
        self.requests = 0
        self.rejected = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests += 1
                    admitted = server.active < server.capacity
                    if admitted:
                        server.active += 1
                        server.peak = max(server.peak, server.active)
                    else:
                        server.rejected += 1
                if not admitted:
                    payload = {
                        "error": {
                            "type": "rate_limit_error",
                            "code": "rate_limit_exceeded",
                            "message": "Too many concurrent requests",
                        }
                    }
                    headers = {"retry-after": server.retry_after} if server.retry_after else {}
                    self._send(429, payload, headers)
                    return
                try:
                    time.sleep(server.latency)
                    text = "ok " + str(len(json.dumps(body.get("messages"))))
                    payload = {
                        "model": body.get("model"),
                        "choices": [
                            {
                                "message": {"role": "assistant", "content": text},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 2},
                    }
                finally:
                    with server.lock:
                        server.active -= 1
                self._send(200, payload, {})

            def _send(self, status: int, payload: Any, headers: dict[str, str]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL, with ``/v1`` as OpenAI's SDK has it."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> CapacityServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class BatchProvider:
    """Loopback fakes of OpenAI's and Anthropic's batch endpoints, on one server.

    OpenAI (base URL ``/v1``): ``POST /v1/files`` (multipart, purpose ``batch``), ``POST
    /v1/batches``, ``GET /v1/batches/{id}``, ``GET /v1/files/{id}/content``. Anthropic (base
    URL without ``/v1``): ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``,
    ``GET /v1/messages/batches/{id}/results``. Each request is answered with the text of its
    last user message in upper case; a request whose text contains ``FAIL`` errors. While
    ``hold`` is set, batches stay in progress. With ``expire_after=k``, a batch ends
    ``expired`` with only its first k requests done.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hold = False
        self.expire_after: int | None = None
        self.batches: dict[str, dict[str, Any]] = {}
        self.files: dict[str, str] = {}
        self.created = 0
        self.polls = 0
        self.posts: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("content-length") or 0))

            def do_POST(self) -> None:
                raw = self._body()
                with server.lock:
                    server.posts.append(self.path)
                if self.path == "/v1/files":
                    import email

                    message = email.message_from_bytes(
                        b"content-type: "
                        + self.headers["content-type"].encode()
                        + b"\r\n\r\n"
                        + raw
                    )
                    text = next(
                        p.get_payload(decode=True).decode()
                        for p in message.get_payload()
                        if p.get_filename()
                    )
                    fid = f"file-{len(server.files)}"
                    server.files[fid] = text
                    self._send(200, {"id": fid, "object": "file", "purpose": "batch"})
                elif self.path == "/v1/batches":
                    body = json.loads(raw)
                    lines = [
                        json.loads(x) for x in server.files[body["input_file_id"]].splitlines()
                    ]
                    bid = server._create("openai", [(r["custom_id"], r["body"]) for r in lines])
                    server.batches[bid]["endpoint"] = body["endpoint"]
                    self._send(200, server._openai(bid))
                elif self.path == "/v1/messages/batches":
                    body = json.loads(raw)
                    rows = [(r["custom_id"], r["params"]) for r in body["requests"]]
                    bid = server._create("anthropic", rows)
                    self._send(200, server._anthropic(bid))
                else:
                    self._send(404, {"error": {"type": "not_found_error", "message": self.path}})

            def do_GET(self) -> None:
                path = self.path
                if path.startswith("/v1/batches/"):
                    server.polls += 1
                    self._send(200, server._openai(path.rsplit("/", 1)[1]))
                elif path.startswith("/v1/files/") and path.endswith("/content"):
                    self._send_text(server.files[path.split("/")[3]])
                elif path.startswith("/v1/messages/batches/") and path.endswith("/results"):
                    self._send_text(server._anthropic_results(path.split("/")[4]))
                elif path.startswith("/v1/messages/batches/"):
                    server.polls += 1
                    self._send(200, server._anthropic(path.rsplit("/", 1)[1]))
                else:
                    self._send(404, {"error": {"type": "not_found_error", "message": path}})

            def _send(self, status: int, payload: Any) -> None:
                self._send_bytes(status, json.dumps(payload).encode(), "application/json")

            def _send_text(self, text: str) -> None:
                self._send_bytes(200, text.encode(), "application/jsonl")

            def _send_bytes(self, status: int, data: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def _create(self, kind: str, rows: list[tuple[str, dict[str, Any]]]) -> str:
        with self.lock:
            self.created += 1
            bid = f"{'batch' if kind == 'openai' else 'msgbatch'}_{self.created}"
            self.batches[bid] = {"kind": kind, "rows": rows}
        return bid

    def _ended(self, bid: str) -> bool:
        return not self.hold

    @staticmethod
    def _text(params: dict[str, Any]) -> str:
        messages = params.get("messages") or params.get("input") or []
        content = messages[-1]["content"]
        if isinstance(content, list):
            return "".join(b.get("text", "") for b in content)
        return str(content)

    def _done_rows(self, bid: str) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
        rows = self.batches[bid]["rows"]
        k = len(rows) if self.expire_after is None else self.expire_after
        return rows[:k], [cid for cid, _ in rows[k:]]

    def _openai(self, bid: str) -> dict[str, Any]:
        batch: dict[str, Any] = {"id": bid, "object": "batch", "endpoint": "/v1/chat/completions"}
        if not self._ended(bid):
            return {**batch, "status": "in_progress"}
        done, left = self._done_rows(bid)
        out, err = [], []
        for cid, body in done:
            text = self._text(body)
            if "FAIL" in text:
                err.append(
                    {
                        "id": f"r-{cid}",
                        "custom_id": cid,
                        "response": {
                            "status_code": 400,
                            "body": {
                                "error": {
                                    "type": "invalid_request_error",
                                    "message": "this request cannot be served",
                                }
                            },
                        },
                        "error": None,
                    }
                )
            elif self.batches[bid].get("endpoint") == "/v1/responses":
                answer = {
                    "model": body.get("model"),
                    "status": "completed",
                    "output": [
                        {
                            "type": "message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": text.upper()}],
                        }
                    ],
                    "usage": {"input_tokens": 100, "output_tokens": 10},
                }
                out.append(
                    {
                        "id": f"r-{cid}",
                        "custom_id": cid,
                        "error": None,
                        "response": {"status_code": 200, "request_id": cid, "body": answer},
                    }
                )
            else:
                out.append(
                    {
                        "id": f"r-{cid}",
                        "custom_id": cid,
                        "error": None,
                        "response": {
                            "status_code": 200,
                            "request_id": cid,
                            "body": {
                                "model": body.get("model"),
                                "choices": [
                                    {
                                        "message": {"role": "assistant", "content": text.upper()},
                                        "finish_reason": "stop",
                                    }
                                ],
                                "usage": {"prompt_tokens": 100, "completion_tokens": 10},
                            },
                        },
                    }
                )
        for cid in left:
            err.append(
                {
                    "id": f"r-{cid}",
                    "custom_id": cid,
                    "response": None,
                    "error": {
                        "code": "batch_expired",
                        "message": "This request could not be executed before the "
                        "completion window expired.",
                    },
                }
            )
        self.files[f"{bid}-out"] = "".join(json.dumps(r) + "\n" for r in out)
        self.files[f"{bid}-err"] = "".join(json.dumps(r) + "\n" for r in err)
        status = "expired" if left else "completed"
        return {
            **batch,
            "status": status,
            "output_file_id": f"{bid}-out",
            "error_file_id": f"{bid}-err" if err else None,
        }

    def _anthropic(self, bid: str) -> dict[str, Any]:
        batch: dict[str, Any] = {"id": bid, "type": "message_batch", "results_url": None}
        if not self._ended(bid):
            return {**batch, "processing_status": "in_progress"}
        return {
            **batch,
            "processing_status": "ended",
            "results_url": f"{self.root}/v1/messages/batches/{bid}/results",
        }

    def _anthropic_results(self, bid: str) -> str:
        done, left = self._done_rows(bid)
        lines = []
        for cid, params in done:
            text = self._text(params)
            if "FAIL" in text:
                result: dict[str, Any] = {
                    "type": "errored",
                    "error": {
                        "type": "error",
                        "error": {
                            "type": "invalid_request_error",
                            "message": "this request cannot be served",
                        },
                    },
                }
            else:
                result = {
                    "type": "succeeded",
                    "message": {
                        "id": f"msg-{cid}",
                        "type": "message",
                        "role": "assistant",
                        "model": params.get("model"),
                        "stop_reason": "end_turn",
                        "content": [{"type": "text", "text": text.upper()}],
                        "usage": {"input_tokens": 100, "output_tokens": 10},
                    },
                }
            lines.append({"custom_id": cid, "result": result})
        lines += [{"custom_id": cid, "result": {"type": "expired"}} for cid in left]
        return "".join(json.dumps(r) + "\n" for r in lines)

    def __enter__(self) -> BatchProvider:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
