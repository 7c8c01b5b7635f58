"""SDK calls through pytest: an eval whose step calls ``openai.AsyncOpenAI`` directly (a fake
transport stands in for the network); the summary's cost table, ``saved by cache`` and the JSON
report include the calls, and the key a 401 echoes is in neither the report nor the store."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

openai = pytest.importorskip("openai")

KEY = "sk-proj-PYTESTCAPTURE0123456789abcdef"

EVAL = textwrap.dedent(
    """
    import json
    from typing import Annotated

    import openai
    import pytest

    from fxtr import ArrayHandle, StepContext, WorkflowContext, step, workflow

    if int(openai.__version__.split(".")[0]) >= 3:
        import httpx2 as http
    else:
        import httpx as http

    KEY = "{key}"

    def fake(request):
        question = json.loads(request.content)["messages"][-1]["content"]
        if "fail" in question:
            body = {{"error": {{"message": f"Incorrect API key provided: {{KEY}}.",
                                "type": "invalid_request_error", "code": "invalid_api_key"}}}}
            return http.Response(401, json=body)
        return http.Response(200, json={{
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{{"index": 0, "finish_reason": "stop",
                          "message": {{"role": "assistant", "content": "Paris"}}}}],
            "usage": {{"prompt_tokens": 900, "completion_tokens": 2, "total_tokens": 902,
                       "prompt_tokens_details": {{"cached_tokens": 512}}}},
        }})

    @step(name="demo.answer")
    async def answer(context: StepContext, question: str) -> str:
        client = openai.AsyncOpenAI(
            api_key=KEY, max_retries=0,
            http_client=http.AsyncClient(transport=http.MockTransport(fake)),
        )
        try:
            reply = await client.chat.completions.create(
                model="gpt-4o-mini", messages=[{{"role": "user", "content": question}}]
            )
        except openai.AuthenticationError:
            return "refused"
        return reply.choices[0].message.content

    @workflow(name="demo.qa")
    async def qa(
        context: WorkflowContext, question: Annotated[ArrayHandle[str], "[case: str]"]
    ) -> Annotated[ArrayHandle[str], "[case: str]"]:
        return context.run_step("answer", answer, {{"question": question}}, map_over=["case"])

    @pytest.mark.fxtr(qa, dims={{"case": "question"}})
    @pytest.mark.parametrize("question", ["capital of France?", "fail please"], ids=["fr", "x"])
    def test_qa(question, result):
        assert result in ("Paris", "refused")
    """
).format(key=KEY)


def _reference_cost() -> float:
    import genai_prices

    usage = genai_prices.Usage(input_tokens=900, output_tokens=2, cache_read_tokens=512)
    return float(genai_prices.calc_price(usage, "gpt-4o-mini", provider_id="openai").total_price)


def test_sdk_calls_count_in_the_summary_the_report_and_the_cache(pytester):
    pytester.makepyfile(test_sdk=EVAL)
    first = pytester.runpytest("-p", "no:cacheprovider", "--fxtr-report", "r1.json")
    first.assert_outcomes(passed=2)
    cost = _reference_cost()
    first.stdout.fnmatch_lines([f"gpt-4o-mini *2 *900 *2 *${cost:.6f}*"])
    report = json.loads((pytester.path / "r1.json").read_text())["jobs"][0]
    assert report["cost"]["calls"] == 2 and report["cost"]["input_tokens"] == 900
    assert report["cost"]["by_model"]["gpt-4o-mini"]["usd"] == pytest.approx(cost)
    from fxtr.report import load_job
    from fxtr.store import open_store

    store = open_store(pytester.path / ".fxtr")
    invocations = load_job(store, report["job_id"]).invocations.values()
    calls = [c for inv in invocations for c in inv.get("model_calls") or []]
    ok = next(c for c in calls if c["status"] == "succeeded")
    failed = next(c for c in calls if c["status"] == "failed")
    assert ok["reply"] == "Paris" and ok["cached_input_tokens"] == 512
    assert ok["cost_usd"] == pytest.approx(cost) and ok["provider"] == "openai"
    assert ok["messages"] == [{"role": "user", "content": "capital of France?"}]
    assert failed["reason"] == "unknown" and failed["category"] == "auth"
    assert failed["cost_usd"] == 0.0

    second = pytester.runpytest("-p", "no:cacheprovider", "--fxtr-report", "r2.json")
    second.assert_outcomes(passed=2)
    second.stdout.fnmatch_lines([f"gpt-4o-mini *0 *0 *0 *$0.0000 *${cost:.6f}"])
    saved = json.loads((pytester.path / "r2.json").read_text())["jobs"][0]["cost"]
    assert saved["saved_usd"] == pytest.approx(cost)

    paths = [pytester.path / "r1.json", pytester.path / "r2.json"]
    for path in [*paths, *Path(pytester.path / ".fxtr").rglob("*")]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
