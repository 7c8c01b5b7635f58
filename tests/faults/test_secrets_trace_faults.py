"""Issue 28 item 6: a tracing task graph is stored redacted.

A model's reply, the request sent to it, a callable step's arguments and a LangGraph node's
state that hold a key are written into the store's trace nodes; no file of the store may hold
the key in any form, while the nodes themselves (names, statuses) are still there to read back.
"""

from __future__ import annotations

import asyncio
import base64
import operator
import secrets
from pathlib import Path
from typing import Annotated, TypedDict

import pytest

from fxtr import secrets as fxtr_secrets
from fxtr.models import MockModelAPI
from fxtr.tracing import Client
from tests.faults.conftest import all_bytes


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    value = "sk-proj-" + secrets.token_hex(20)
    monkeypatch.setenv("OPENAI_API_KEY", value)
    fxtr_secrets._env_seen = (-1.0, frozenset())
    return value


def _forms(key: str) -> dict[str, str]:
    return {
        "raw": key,
        "bare": key.removeprefix("sk-proj-"),
        "b64": base64.b64encode(key.encode()).decode().rstrip("="),
    }


def _lookup(query: str, token: str) -> str:
    if "fail" in query:
        raise RuntimeError(f"tool refused token {token}")
    return f"looked up {query} with {token}"


def test_trace_nodes_reach_the_store_redacted(tmp_path: Path, key: str) -> None:
    store = tmp_path / "store"
    bare = key.removeprefix("sk-proj-")
    flux = Client({"m": MockModelAPI("m", f"your key is {key} (or {bare})")}, store=str(store))

    async def main() -> None:
        with flux.task("leaky") as t:
            reply = await flux.messages.create(
                model="m", messages=[{"role": "user", "content": f"my key is {key}"}]
            )
            assert key in reply.text  # the caller gets the reply as the model sent it
            flux.step("lookup", _lookup, "weather", key)
            with pytest.raises(RuntimeError):
                flux.step("lookup-fail", _lookup, "fail", token=key)
        task_ids.append(t.task_id)

    task_ids: list[str] = []
    asyncio.run(main())
    held = all_bytes(store)
    leaks = [name for name, form in _forms(key).items() if form.encode() in held]
    assert not leaks, leaks
    graph = Client({"m": MockModelAPI("m", "x")}, store=str(store)).get_task_graph(task_ids[0])
    names = [(n.kind, n.name, n.status) for n in graph.nodes]
    assert ("model_call", "m", "succeeded") in names
    assert ("step", "lookup", "succeeded") in names and ("step", "lookup-fail", "failed") in names
    assert "[redacted]" in str([n.to_json() for n in graph.nodes])


def test_langgraph_node_state_reaches_the_store_redacted(tmp_path: Path, key: str) -> None:
    pytest.importorskip("langgraph")
    from langgraph.graph import END, START, StateGraph

    from fxtr.integrations.langgraph import FluxCheckpointer

    class State(TypedDict):
        items: Annotated[list, operator.add]

    store = tmp_path / "store"
    flux = Client({"m": MockModelAPI("m", f"tool args: {{'api_key': '{key}'}}")}, store=str(store))

    def call_tool(state: State) -> dict[str, list[str]]:
        reply = asyncio.run(
            flux.messages.create(model="m", messages=[{"role": "user", "content": "go"}])
        )
        raise ValueError(f"tool failed with {reply.text}")

    g = StateGraph(State)
    g.add_node("tool", call_tool)
    g.add_edge(START, "tool")
    g.add_edge("tool", END)
    app = g.compile(checkpointer=FluxCheckpointer(flux))
    with flux.task("agent") as t, pytest.raises(ValueError):
        app.invoke({"items": []}, {"configurable": {"thread_id": "k"}})
    held = all_bytes(store)
    leaks = [name for name, form in _forms(key).items() if form.encode() in held]
    assert not leaks, leaks
    graph = Client({"m": MockModelAPI("m", "x")}, store=str(store)).get_task_graph(t.task_id)
    (tool,) = graph.find(name="tool")
    assert tool.status == "failed" and "[redacted]" in (tool.error or "")
