"""Capture overhead: 1,000 openai SDK calls over a mock transport, in one run.

- plain: the SDK's own ``request`` (fxtr's hook removed);
- hooked, outside any step: the hook installed, no step or task running (target: ~0);
- captured inside a step invocation (``fxtr.run``) and inside a tracing task.

Each call under capture is paired with a plain call made just before or after it (the hook is
removed and put back between the two, the order alternating), so the machine's noise hits both
alike; the figure is the median of the paired differences in this thread's CPU time (target:
under 50 us), for a chat completion and a streamed one (usage from the final chunk). The hook's
own work is also timed alone (no SDK), in a step, in a tracing task and outside both.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

import httpx2
import openai

from fxtr import StepContext, WorkflowContext, run, step, workflow
from fxtr.experiment.handles import ScalarHandle
from fxtr.models import MockModelAPI
from fxtr.tracing import Client, _capture

N = 1_000
USER = [{"role": "user", "content": "What is the capital of France?"}]
CHAT = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Paris."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 3, "total_tokens": 1203},
    }
).encode()


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> str:
    choices = [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": choices,
        "usage": usage,
    }
    return f"data: {json.dumps(body)}\n\n"


STREAM = (
    _chunk({"role": "assistant", "content": "Par"})
    + _chunk({"content": "is."})
    + _chunk({}, finish="stop")
    + _chunk({}, usage={"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22})
    + "data: [DONE]\n\n"
).encode()


def handler(request: httpx2.Request) -> httpx2.Response:
    if b'"stream":true' in request.content or b'"stream": true' in request.content:
        return httpx2.Response(200, content=STREAM, headers={"content-type": "text/event-stream"})
    return httpx2.Response(200, content=CHAT, headers={"content-type": "application/json"})


CLIENT = openai.OpenAI(
    api_key="sk-bench-000000000000",
    max_retries=0,
    http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
)


def one_call(streamed: bool) -> None:
    if streamed:
        for _event in CLIENT.chat.completions.create(
            model="gpt-4o-mini",
            messages=USER,
            stream=True,
            stream_options={"include_usage": True},
        ):
            pass
    else:
        CLIENT.chat.completions.create(model="gpt-4o-mini", messages=USER)


def paired(streamed: bool) -> list[tuple[float, float]]:
    """N pairs (plain, hooked) of one call each; which of the two goes first alternates, so
    neither gains from running second (warm caches) and noise hits both alike."""
    clock = time.thread_time  # CPU time of this thread: other processes on the machine do not count
    pairs = []
    for i in range(N):
        times = {}
        for hooked in (False, True) if i % 2 else (True, False):
            if hooked:
                _capture.patch_sdk(openai)
            else:
                _capture.unpatch_sdk(openai)
            start = clock()
            one_call(streamed)
            times[hooked] = clock() - start
        pairs.append((times[False], times[True]))
    _capture.patch_sdk(openai)
    return pairs


PAIRS: dict[str, list[tuple[float, float]]] = {}


@step(name="bench.calls")
async def in_step(context: StepContext, streamed: bool) -> int:
    PAIRS["step"] = paired(streamed)
    return len(PAIRS["step"])


@workflow(name="bench.capture")
async def bench_wf(context: WorkflowContext, streamed: ScalarHandle[bool]) -> ScalarHandle[int]:
    return context.run_step("calls", in_step, {"streamed": streamed})


def in_job(streamed: bool, store: str) -> list[tuple[float, float]]:
    result = run(bench_wf, {"streamed": streamed}, store=store)
    assert result.invocations[0].calls == N, result.invocations[0].calls
    return PAIRS["step"]


def in_task(streamed: bool) -> list[tuple[float, float]]:
    client = Client({"m": MockModelAPI("gpt-4o-mini", "x")})
    with client.task("bench") as t:
        pairs = paired(streamed)
    assert len(t.graph.find(kind="model_call")) == N
    return pairs


def _per_call(sdk: Any, options: Any, completion: Any) -> float:
    clock = time.thread_time
    _capture._Call.start(sdk, CLIENT, options).returned(completion)  # type: ignore[union-attr]  # prices looked up once
    start = clock()
    for _ in range(10 * N):
        call = _capture._Call.start(sdk, CLIENT, options)
        assert call is not None
        call.returned(completion)
    return (clock() - start) / (10 * N)


def hook_alone() -> None:
    """The hook's own work per call, without the SDK: start a call and read a parsed reply.

    The SDK's call (~0.3-2 ms here, depending on the machine's load) is the noise floor of
    the paired figures; this isolates what capture adds.
    """
    completion = openai.types.chat.ChatCompletion.model_validate_json(CHAT)
    options = openai._models.FinalRequestOptions.construct(
        method="post", url="/chat/completions", json_data={"model": "gpt-4o-mini", "messages": USER}
    )
    sdk = _capture._SDK("openai", sys.modules["openai._base_client"])
    client = Client({"m": MockModelAPI("gpt-4o-mini", "x")})
    clock = time.thread_time
    rows = {}
    with client.task("bench"):
        rows["in a tracing task (a node)"] = _per_call(sdk, options, completion)
    from fxtr.experiment._records import Invocation
    from fxtr.tracing._recorder import current_invocation

    token = current_invocation.set(Invocation("bench/step", "bench.step", "running"))
    try:
        rows["in a step invocation"] = _per_call(sdk, options, completion)
    finally:
        current_invocation.reset(token)

    def sdk_request(*args: Any, **kwargs: Any) -> None:
        return None

    hooked = _capture._sync_request(sdk_request, sdk)
    start = clock()
    for _ in range(10 * N):
        sdk_request(None, None, options)
    bare = clock() - start
    start = clock()
    for _ in range(10 * N):
        hooked(None, None, options)
    rows["outside any step"] = (clock() - start - bare) / (10 * N)
    print(f"the hook alone ({10 * N} calls, no SDK):")
    for name, seconds in rows.items():
        print(f"  {name:28s} {seconds * 1e6:6.1f} us per call (target < 50)")


def main() -> None:
    import tempfile

    hook_alone()

    tmp = tempfile.mkdtemp(prefix="fxtr-bench-capture-")
    for streamed in (False, True):
        kind = "streamed chat" if streamed else "chat"
        one_call(streamed)  # warm up
        runs = {
            "hooked, outside any step": paired(streamed),
            "captured in a step": in_job(streamed, f"{tmp}/{streamed}"),
            "captured in a tracing task": in_task(streamed),
        }
        print(f"{N} {kind} completions over httpx2.MockTransport, paired with the plain SDK:")
        for name, pairs in runs.items():
            plain = statistics.median(p for p, _ in pairs)
            hooked = statistics.median(h for _, h in pairs)
            diff = statistics.median(h - p for p, h in pairs)
            print(
                f"  {name:28s} plain {plain * 1e6:7.1f} us, {hooked / plain:5.2f} x plain, "
                f"{diff * 1e6:+6.1f} us per call (median of paired differences; target < 50)"
            )


if __name__ == "__main__":
    sys.exit(main())
