"""FluxCheckpointer against InMemorySaver on the same LangGraph runs, measured in turn.

Two programs: 200 super-steps of one task each, and 50 super-steps of 8 parallel tasks.
Each saver runs 7 times, alternating; the best of each is compared (target: under 1.3 x).
The baseline runs where no FluxCheckpointer callback handler is installed, as it would in a
program that does not use fxtr.
"""

from __future__ import annotations

import contextvars
import operator
import time
from typing import Annotated, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from fxtr.integrations import langgraph as adapter
from fxtr.integrations.langgraph import FluxCheckpointer
from fxtr.models import MockModelAPI
from fxtr.tracing import Client

STEPS = 200
WIDE_STEPS, WIDTH = 50, 8
ROUNDS = 7


class State(TypedDict):
    n: int


class WideState(TypedDict):
    n: Annotated[int, operator.add]


def tick(state: State) -> State:
    return {"n": state["n"] + 1}


def more(state: State) -> str:
    return "tick" if state["n"] < STEPS else END


def chain() -> StateGraph:
    g = StateGraph(State)
    g.add_node("tick", tick)
    g.add_edge(START, "tick")
    g.add_conditional_edges("tick", more, ["tick", END])
    return g


def wide() -> StateGraph:
    """WIDTH parallel branches joining into one node, WIDE_STEPS / 2 times."""

    def branch(state: WideState) -> WideState:
        return {"n": 1}

    def join(state: WideState) -> WideState:
        return {"n": 0}

    def again(state: WideState) -> list[str] | str:
        return [f"b{i}" for i in range(WIDTH)] if state["n"] < WIDTH * WIDE_STEPS // 2 else END

    g = StateGraph(WideState)
    for i in range(WIDTH):
        g.add_node(f"b{i}", branch)
        g.add_edge(START, f"b{i}")
    g.add_node("join", join)
    g.add_edge([f"b{i}" for i in range(WIDTH)], "join")
    g.add_conditional_edges("join", again, [*(f"b{i}" for i in range(WIDTH)), END])
    return g


def timed(build, saver, thread: str, start: dict, expected: int) -> float:
    app = build().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 10_000}
    began = time.perf_counter()
    out = app.invoke(start, config)
    elapsed = time.perf_counter() - began
    assert out["n"] == expected, out
    return elapsed


def without_handler(fn, *args):
    context = contextvars.copy_context()
    context.run(adapter._watching.set, None)
    return context.run(fn, *args)


def compare(label: str, build, expected: int) -> float:
    base, flux = [], []
    for i in range(ROUNDS):
        base.append(without_handler(timed, build, InMemorySaver(), f"b{i}", {"n": 0}, expected))
        client = Client({"m": MockModelAPI("m", "x")})
        flux.append(timed(build, FluxCheckpointer(client), f"f{i}", {"n": 0}, expected))
    ratio = min(flux) / min(base)
    print(
        f"{label}: InMemorySaver {min(base):.3f} s, FluxCheckpointer {min(flux):.3f} s, "
        f"ratio {ratio:.2f} x (target < 1.3)"
    )
    return ratio


if __name__ == "__main__":
    compare(f"{STEPS} super-steps x 1 task", chain, STEPS)
    compare(f"{WIDE_STEPS} super-steps x {WIDTH} tasks", wide, WIDTH * WIDE_STEPS // 2)
