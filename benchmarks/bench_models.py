"""2,000 model calls at concurrency 200 against an in-process fake server (50 ms per call).

The ideal is 2,000 / 200 x 50 ms = 0.5 s; prints the measured time and its ratio to the ideal.
The fake server is an ``httpx.MockTransport`` whose handler sleeps 50 ms, so the figure is
fxtr's client overhead (body building, parsing, pricing, recording) plus httpx's.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from fxtr.models import ContentText, ModelRequest, OpenAIChatAPI, UserMessage

CALLS, CONCURRENCY, DELAY = 2000, 200, 0.05
BODY = {
    "id": "c",
    "model": "gpt-4o-mini",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
    ],
    "usage": {"prompt_tokens": 20, "completion_tokens": 2},
}


async def handler(request: httpx.Request) -> httpx.Response:
    await asyncio.sleep(DELAY)
    return httpx.Response(200, json=BODY)


async def main() -> float:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    api = OpenAIChatAPI(
        "gpt-4o-mini", api_key="sk-bench", http_client=client, max_concurrency=CONCURRENCY
    )
    request = ModelRequest(context=(UserMessage(content=(ContentText(text="hi"),)),))
    start = time.perf_counter()
    responses = await asyncio.gather(*(api.generate(request) for _ in range(CALLS)))
    elapsed = time.perf_counter() - start
    await client.aclose()
    assert all(r.text == "ok" for r in responses)
    return elapsed


if __name__ == "__main__":
    elapsed = asyncio.run(main())
    ideal = CALLS / CONCURRENCY * DELAY
    print(f"{CALLS} calls at concurrency {CONCURRENCY}, {DELAY * 1000:.0f} ms each")
    print(
        f"ideal {ideal:.3f} s   measured {elapsed:.3f} s   "
        f"ratio {elapsed / ideal:.2f} x (target < 1.2)"
    )
