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
