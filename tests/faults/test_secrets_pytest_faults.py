"""Issue 28 item 1: a provider key never reaches pytest's own output.

An eval's steps call a provider that refuses the key and echoes it (``Incorrect API key
provided: Bearer sk-...``, and the key without its prefix): fxtr's own client (respx stands in
for the network) and the official openai and anthropic SDKs (``httpx2.MockTransport``). Each
step prints the echo, logs it and raises it. pytest runs with ``-rA`` (every section),
``-o log_cli=true`` (live logging), ``--junitxml`` and the fxtr summary; nothing it writes may
hold the key in any form, while the echo itself (redacted) still reaches the user.
"""

from __future__ import annotations

import base64
import secrets
import subprocess
from pathlib import Path

import pytest

from tests.faults.conftest import PYTHON, env

pytest.importorskip("openai")
pytest.importorskip("anthropic")

EVAL = '''
import json
import logging
from typing import Annotated

import anthropic
import httpx
import httpx2
import openai
import pytest
import respx

from fxtr.experiment.handles import ArrayHandle
from fxtr.experiment.steps import StepContext, step
from fxtr.experiment.workflows import WorkflowContext, workflow
from fxtr.models import OpenAIChatAPI, ModelRequest, UserMessage, ContentText

log = logging.getLogger("evflow")


def echo(key):
    bare = key.split("-")[-1]
    return f"Incorrect API key provided: Bearer {key} (also seen as {bare})"


def key_of(headers):
    return (headers.get("authorization") or "").removeprefix("Bearer ") or headers.get("x-api-key")


ROUTER = respx.mock(assert_all_called=False)
ROUTER.start()
ROUTER.post("http://fxtr-provider.test/v1/chat/completions").mock(
    side_effect=lambda request: httpx.Response(
        401, json={"error": {"message": echo(key_of(request.headers)), "code": "invalid_api_key"}}
    )
)


def sdk_reply(request):
    key = key_of(request.headers)
    if "anthropic" in str(request.url):
        body = {"type": "error", "error": {"type": "authentication_error", "message": echo(key)}}
    else:
        body = {"error": {"message": echo(key), "type": "invalid_request_error",
                          "code": "invalid_api_key"}}
    return httpx2.Response(401, json=body)


async def call(provider):
    if provider == "fxtr":
        api = OpenAIChatAPI("gpt-4o-mini", base_url="http://fxtr-provider.test/v1")
        request = ModelRequest(context=[UserMessage(content=[ContentText(text="hi")])])
        try:
            return (await api.generate(request)).text
        finally:
            await api.aclose()
    transport = httpx2.AsyncClient(transport=httpx2.MockTransport(sdk_reply))
    if provider == "openai":
        client = openai.AsyncOpenAI(max_retries=0, http_client=transport,
                                    base_url="http://openai.test/v1")
        reply = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        return reply.choices[0].message.content
    client = anthropic.AsyncAnthropic(max_retries=0, http_client=transport,
                                      base_url="http://anthropic.test")
    reply = await client.messages.create(
        model="claude-3-5-haiku-latest", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    return reply.content[0].text


@step(name="ev.ask")
async def ask(context: StepContext, provider: str) -> str:
    try:
        return await call(provider)
    except Exception as exc:
        print(f"stdout of {provider}: {exc}")
        log.warning("provider %s said: %s", provider, exc)
        log.error("with its traceback", exc_info=True)
        raise


@workflow(name="ev.qa")
async def qa(
    context: WorkflowContext, provider: Annotated[ArrayHandle[str], "[case: str]"]
) -> Annotated[ArrayHandle[str], "[case: str]"]:
    return context.run_step("ask", ask, {"provider": provider}, map_over=["case"])


@pytest.mark.fxtr(qa, dims={"case": "provider"})
@pytest.mark.parametrize("provider", ["fxtr", "openai", "anthropic"])
def test_ask(provider, result):
    assert result == "ok"


def test_plain_sdk_failure_in_a_session_with_evals():
    """A test that is not an eval, run in the same session: its longrepr is redacted too."""
    import asyncio
    asyncio.run(call("openai"))
'''


def _forms(key: str, prefix: str) -> dict[str, str]:
    bare = key.removeprefix(prefix)
    return {
        "raw": key,
        "bare": bare,
        "bearer": f"Bearer {key}",
        "b64": base64.b64encode(key.encode()).decode().rstrip("="),
    }


@pytest.mark.parametrize("extra", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_keys_reach_no_output_of_pytest(tmp_path: Path, extra: list[str]) -> None:
    openai_key = "sk-proj-" + secrets.token_hex(20)
    anthropic_key = "sk-ant-api03-" + secrets.token_hex(20)
    (tmp_path / "test_leak.py").write_text(EVAL)
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    child = env(OPENAI_API_KEY=openai_key, ANTHROPIC_API_KEY=anthropic_key)
    child["PYTHONPATH"] += ":" + str(tmp_path)
    proc = subprocess.run(
        [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-o", "log_cli=true",
         "--log-cli-level=INFO", "--junitxml=j.xml", "--fxtr-report=r.json", "-v",
         "--tb=long", "--showlocals", *extra],
        capture_output=True, text=True, cwd=tmp_path, env=child, timeout=180,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-4000:]
    assert "INTERNALERROR" not in out, out[-4000:]
    assert out.count("Incorrect API key provided") >= 3, out[-4000:]
    assert "[redacted]" in out
    if not extra:
        assert "provider anthropic said" in out and "stdout of openai" in out, out[-4000:]
    texts = {"terminal": out, "junit": (tmp_path / "j.xml").read_text(),
             "report": (tmp_path / "r.json").read_text()}
    leaks = [
        f"{form} of {which} in {name}"
        for which, key, prefix in (("openai", openai_key, "sk-proj-"),
                                   ("anthropic", anthropic_key, "sk-ant-api03-"))
        for form, text in _forms(key, prefix).items()
        for name, got in texts.items()
        if text in got
    ]
    assert not leaks, (leaks, out[-6000:])
