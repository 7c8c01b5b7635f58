"""``model="auto"`` in the tracing client (DESIGN §3, issue 40 item 4): routing by rules,
moving on after a context overflow or a retired model id, and resume re-routing."""

from __future__ import annotations

import pytest

from fxtr.models import MockModelAPI, ModelCallError, ModelCallFailure, set_price
from fxtr.tracing import Client

RETIRED = ModelCallFailure(
    category="not_found",
    description="HTTP 404: invalid_request_error / model_not_found: The model `gpt-4-0314` "
    "has been deprecated",
    status_code=404,
)
OVERFLOW = ModelCallFailure(
    category="context_overflow",
    description="HTTP 400: context_length_exceeded: maximum context length is 8192 tokens",
    status_code=400,
)


def _ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.mark.asyncio
async def test_the_first_model_whose_window_fits_takes_the_call():
    small = MockModelAPI("small-m", "from small")
    big = MockModelAPI("big-m", "from big")
    client = Client({"small": small, "big": big}, context_windows={"small": 1000})
    with client.task("t"):
        short = await client.messages.create(model="auto", messages=_ask("hi"))
        long = await client.messages.create(model="auto", messages=_ask("x" * 8000))
    assert short.text == "from small"  # 1 + 256 tokens fit in 1,000
    assert long.text == "from big"  # 2,000 + 256 do not
    assert len(small.requests) == 1 and len(big.requests) == 1


@pytest.mark.asyncio
async def test_a_max_cost_skips_the_models_it_cannot_pay_for():
    set_price("route-pricey", input=100.0, output=100.0)
    set_price("route-cheap", input=0.1, output=0.1)
    client = Client(
        {
            "unpriced": MockModelAPI("route-unpriced", "unpriced"),
            "pricey": MockModelAPI("route-pricey", "pricey"),
            "cheap": MockModelAPI("route-cheap", "cheap"),
        }
    )
    # 1 input token + 256 output tokens: pricey ~$0.0257, cheap ~$0.0000257
    reply = await client.messages.create(model="auto", messages=_ask("hi"), max_cost=0.001)
    assert reply.text == "cheap"
    reply = await client.messages.create(model="auto", messages=_ask("hi"), max_cost=1.0)
    assert reply.text == "pricey"  # the unpriced one cannot be held to a max_cost
    assert (await client.messages.create(model="auto", messages=_ask("hi"))).text == "unpriced"
    with pytest.raises(LookupError, match="route-pricey|pricey: ~\\$0.0257"):
        await client.messages.create(model="auto", messages=_ask("hi"), max_cost=1e-9)


@pytest.mark.asyncio
@pytest.mark.parametrize("failure", [OVERFLOW, RETIRED], ids=["overflow", "retired"])
async def test_a_call_that_fails_so_moves_to_the_next_model_as_a_dependent_node(failure):
    def fail(request):
        return failure

    client = Client(
        {"first": MockModelAPI("first-m", fail), "second": MockModelAPI("second-m", "ok")}
    )
    with client.task("t") as t:
        reply = await client.messages.create(model="auto", messages=_ask("hi"))
    assert reply.text == "ok"
    calls = [n for n in client.get_task_graph(t.task_id).nodes if n.kind == "model_call"]
    assert [(n.name, n.status) for n in calls] == [("first-m", "failed"), ("second-m", "succeeded")]
    assert calls[1].depends_on == [calls[0].id]
    expected = "context_overflow" if failure is OVERFLOW else "unknown"
    assert calls[0].reason == expected


@pytest.mark.asyncio
async def test_other_failures_are_not_rerouted():
    def limited(request):
        return ModelCallFailure(category="rate_limit", description="HTTP 429", status_code=429)

    second = MockModelAPI("second-m", "ok")
    client = Client({"first": MockModelAPI("first-m", limited), "second": second})
    with pytest.raises(ModelCallError), client.task("t"):
        await client.messages.create(model="auto", messages=_ask("hi"))
    assert second.requests == []


@pytest.mark.asyncio
async def test_the_seeds_worked_example_a_retired_model_id_resumed_exactly():
    """A step sends to a retired model id; resume re-routes exactly that call."""

    def retired(request):
        return RETIRED

    legacy = MockModelAPI("gpt-4-0314", retired)
    current = MockModelAPI("gpt-4o-mini", "Acme, Globex, Initech.")
    client = Client({"legacy": legacy, "current": current})
    with client.task("company-brain") as t:
        summary = await client.messages.create(model="current", messages=_ask("summarize"))
        with pytest.raises(ModelCallError):
            await client.messages.create(model="legacy", messages=_ask("competitors?"))
    assert summary.text.startswith("Acme")
    response = await client.resume(t.task_id)
    assert response.text == "Acme, Globex, Initech."
    graph = client.get_task_graph(t.task_id)
    calls = [n for n in graph.nodes if n.kind == "model_call"]
    assert [(n.name, n.status) for n in calls] == [
        ("gpt-4o-mini", "succeeded"),
        ("gpt-4-0314", "failed"),
        ("gpt-4o-mini", "succeeded"),
    ]
    assert calls[2].depends_on == [calls[1].id]
    assert len(current.requests) == 2 and current.requests[1].context[-1].content[0].text == (
        "competitors?"
    )
    assert await client.resume(t.task_id) is None  # nothing left to re-run
