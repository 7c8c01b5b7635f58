"""A model on a local OpenAI-compatible server (vLLM, Ollama, LM Studio) with no API key
(issue 37 item 2): no Authorization header; a 401 to a call that sent no key fails at once,
naming the variable to set."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from fxtr.models import (
    AnthropicMessagesAPI,
    ContentText,
    ModelCallFailure,
    ModelRequest,
    ModelResponse,
    OpenAIChatAPI,
    OpenAIResponsesAPI,
    UserMessage,
    generate_with_retries,
)

pytestmark = pytest.mark.filterwarnings("ignore::fxtr.models.UnknownPriceWarning")
REQUEST = ModelRequest(context=(UserMessage(content=(ContentText(text="hi"),)),))
CHAT = {
    "model": "m",
    "choices": [{"message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}
RESPONSES = {
    "model": "m",
    "status": "completed",
    "output": [{"type": "message", "content": [{"type": "output_text", "text": "hello"}]}],
    "usage": {"input_tokens": 3, "output_tokens": 1},
}
MESSAGES = {
    "model": "m",
    "content": [{"type": "text", "text": "hello"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}


class LocalServer:
    """A loopback server answering chat, responses and messages; records each request's
    headers. With ``require_key``, a request without a key is answered 401 as vLLM does."""

    def __init__(self, require_key: bool) -> None:
        self.headers: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                seen = {k.lower(): v for k, v in self.headers.items()}
                server.headers.append(seen)
                if require_key and not ({"authorization", "x-api-key"} & set(seen)):
                    status, payload = 401, {"error": {"message": "Unauthorized"}}
                elif self.path.endswith("/chat/completions"):
                    status, payload = 200, CHAT
                elif self.path.endswith("/responses"):
                    status, payload = 200, RESPONSES
                else:
                    status, payload = 200, MESSAGES
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.root = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


APIS = [
    (OpenAIChatAPI, "/v1", "OPENAI_API_KEY"),
    (OpenAIResponsesAPI, "/v1", "OPENAI_API_KEY"),
    (AnthropicMessagesAPI, "", "ANTHROPIC_API_KEY"),
]


@pytest.mark.parametrize(("api_class", "suffix", "variable"), APIS)
def test_no_key_sends_no_authorization_header(monkeypatch, api_class, suffix, variable):
    monkeypatch.delenv(variable, raising=False)
    server = LocalServer(require_key=False)

    async def go() -> Any:
        api = api_class("m", base_url=server.root + suffix)
        try:
            return await generate_with_retries(api, REQUEST)
        finally:
            await api.aclose()

    try:
        result = asyncio.run(go())
    finally:
        server.close()
    assert isinstance(result, ModelResponse), result
    assert result.text == "hello"
    (headers,) = server.headers
    assert "authorization" not in headers and "x-api-key" not in headers


@pytest.mark.parametrize(("api_class", "suffix", "variable"), APIS)
def test_a_401_without_a_key_fails_at_once_naming_the_variable(
    monkeypatch, api_class, suffix, variable
):
    monkeypatch.delenv(variable, raising=False)
    server = LocalServer(require_key=True)

    async def go() -> Any:
        api = api_class("m", base_url=server.root + suffix)
        try:
            return await generate_with_retries(api, REQUEST)
        finally:
            await api.aclose()

    start = time.monotonic()
    try:
        result = asyncio.run(go())
    finally:
        server.close()
    assert time.monotonic() - start < 5
    assert isinstance(result, ModelCallFailure), result
    assert result.category == "auth" and result.status_code == 401
    assert variable in result.description and "no API key was sent" in result.description
    assert len(server.headers) == 1  # not retried


def test_a_key_from_the_environment_is_sent_as_a_bearer_token(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-wrong-key-123456")
    server = LocalServer(require_key=True)

    async def go() -> Any:
        api = OpenAIChatAPI("m", base_url=server.root + "/v1")
        try:
            return await generate_with_retries(api, REQUEST)
        finally:
            await api.aclose()

    try:
        result = asyncio.run(go())
    finally:
        server.close()
    assert isinstance(result, ModelResponse)
    assert server.headers[0]["authorization"] == "Bearer sk-local-wrong-key-123456"


@pytest.mark.parametrize(
    ("api_class", "variable", "suffix"),
    [
        (OpenAIResponsesAPI, "OPENAI_BASE_URL", "/v1"),
        (OpenAIChatAPI, "OPENAI_BASE_URL", "/v1"),
        (AnthropicMessagesAPI, "ANTHROPIC_BASE_URL", ""),
    ],
)
def test_the_base_url_comes_from_the_sdks_variable(monkeypatch, api_class, variable, suffix):
    """As the openai and anthropic SDKs do (issue 40 item 5): an explicit base_url wins."""
    monkeypatch.delenv(variable.replace("BASE_URL", "API_KEY"), raising=False)
    server = LocalServer(require_key=False)
    monkeypatch.setenv(variable, server.root + suffix + "/")

    async def go() -> Any:
        api = api_class("m")
        try:
            return api.base_url, await generate_with_retries(api, REQUEST)
        finally:
            await api.aclose()

    try:
        base_url, result = asyncio.run(go())
    finally:
        server.close()
    assert base_url == server.root + suffix
    assert isinstance(result, ModelResponse) and result.text == "hello"
    assert api_class("m", base_url="http://127.0.0.1:9/v1").base_url == "http://127.0.0.1:9/v1"
