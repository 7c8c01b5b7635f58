"""A 200-super-step LangGraph run with FluxCheckpointer against InMemorySaver.

Prints the ratio of the best of five runs each (target: under 1.3 x).
"""

from __future__ import annotations

import time
from typing import TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from fxtr.integrations.langgraph import FluxCheckpointer
from fxtr.models import MockModelAPI
from fxtr.tracing import Client

STEPS = 200


class State(TypedDict):
    n: int


def tick(state: State) -> State:
    return {"n": state["n"] + 1}


def more(state: State) -> str:
    return "tick" if state["n"] < STEPS else END


def build():
    g = StateGraph(State)
    g.add_node("tick", tick)
    g.add_edge(START, "tick")
    g.add_conditional_edges("tick", more, ["tick", END])
    return g


def timed(saver, thread: str) -> float:
    app = build().compile(checkpointer=saver)
    start = time.perf_counter()
    out = app.invoke({"n": 0}, {"configurable": {"thread_id": thread}, "recursion_limit": 1000})
    assert out["n"] == STEPS
    return time.perf_counter() - start


if __name__ == "__main__":
    client = Client({"m": MockModelAPI("m", "x")})
    base = min(timed(InMemorySaver(), f"b{i}") for i in range(5))
    flux = min(timed(FluxCheckpointer(client), f"f{i}") for i in range(5))
    print(f"{STEPS} super-steps: InMemorySaver {base:.3f} s, FluxCheckpointer {flux:.3f} s")
    print(f"ratio {flux / base:.2f} x (target < 1.3)")
