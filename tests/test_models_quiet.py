"""fxtr's own HTTP clients set off no warning meant for user code (issue 37 item 9): a run
against a loopback OpenAI-compatible server shows no hermeticity notice and no watchdog
warning, and one HTTP client serves every call to a model (base URL and key) in a process."""

from __future__ import annotations

import asyncio
import textwrap

import pytest

from fxtr.models import ContentText, ModelRequest, OpenAIChatAPI, UserMessage, set_price
from tests.loopback import CapacityServer

EVAL = textwrap.dedent(
    """
    import os

    import pytest

    from fxtr.evals import Case, Model, evaluate, includes
    MODEL = Model("openai-compatible/loopback-quiet", base_url=os.environ["EVAL_URL"])
    CASES = [Case(id=f"c{i}", input=f"q{i}", target="ok") for i in range(60)]

    @pytest.mark.fxtr(evaluate, dims={"model": "model", "case": "case"},
                      inputs={"scorer": includes()})
    @pytest.mark.parametrize("model", [MODEL])
    @pytest.mark.parametrize("case", CASES)
    def test_loopback(model, case, result):
        assert result is not None
    """
)


def test_a_run_against_a_loopback_server_shows_no_hermeticity_or_watchdog_warning(
    pytester, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-loopback-quiet")
    monkeypatch.setenv("SHELL", "/bin/bash")
    pytester.makepyfile(test_loopback=EVAL)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    with CapacityServer(capacity=64, latency=0.01) as server:
        monkeypatch.setenv("EVAL_URL", server.url)
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "-o", "log_cli=true", "--log-cli-level=WARNING"
        )
    result.assert_outcomes(passed=60)
    text = result.stdout.str() + result.stderr.str()
    assert "touched local state" not in text, text[-3000:]
    assert "blocked the event loop" not in text, text[-3000:]
    assert "SHELL" not in text


@pytest.mark.asyncio
async def test_one_http_client_per_model_and_key_in_a_process(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-loopback-one-client")
    set_price("loopback-one", input=1.0, output=1.0)
    request = ModelRequest(context=(UserMessage(content=(ContentText(text="q"),)),))
    with CapacityServer(capacity=64, latency=0.0) as server:
        apis = [OpenAIChatAPI("loopback-one", base_url=server.url) for _ in range(5)]
        other_key = OpenAIChatAPI("loopback-one", base_url=server.url, api_key="sk-other-12345678")
        try:
            await asyncio.gather(*(api.generate(request) for api in apis))
            assert len({id(api._client) for api in apis}) == 1
            assert other_key._client is not apis[0]._client
        finally:
            for api in [*apis, other_key]:
                await api.aclose()
        # closing an API does not close the shared client under the others
        again = OpenAIChatAPI("loopback-one", base_url=server.url)
        try:
            assert (await again.generate(request)).text.startswith("ok")
        finally:
            await again.aclose()
