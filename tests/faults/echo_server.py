"""A fake provider on 127.0.0.1: prints its port, answers every POST with the key it received
(raw, without its ``sk-proj-`` prefix, and base64), as careless gateways do."""

from __future__ import annotations

import base64
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Echo(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        body = json.dumps({
            "error": f"Incorrect API key provided: {key}",
            "bare": key.removeprefix("sk-proj-"),
            "b64": base64.b64encode(key.encode()).decode(),
            "basic": base64.b64encode(f":{key}".encode()).decode(),
            "basic_user": "Basic " + base64.b64encode(f"user:{key}".encode()).decode(),
            "bearer_b64": base64.urlsafe_b64encode(f"Bearer {key}".encode()).decode(),
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    print(server.server_address[1], flush=True)
    server.serve_forever()
