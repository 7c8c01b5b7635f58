"""FluxCheckpointer against InMemorySaver on the same LangGraph runs, measured in turn.

Two programs: 200 super-steps of one task each, and 50 super-steps of 8 parallel tasks.
Each saver runs 11 times, alternating; printed, for the process's CPU time (all threads:
what the mirror costs, least disturbed by other processes) and for wall time: the ratio of
the best runs, and the median of the ratios of neighbouring runs (target: under 1.3 x).
The baseline runs where no FluxCheckpointer callback handler is installed, as it would in a
program that does not use fxtr.
"""

from __future__ import annotations

import contextvars
import operator
import statistics
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
ROUNDS = 11


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


def timed(build, saver, thread: str, start: dict, expected: int) -> tuple[float, float]:
    """Wall seconds and CPU seconds (all threads of the process) of one run."""
    app = build().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 10_000}
    wall, cpu = time.perf_counter(), time.process_time()
    out = app.invoke(start, config)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert out["n"] == expected, out
    return wall, cpu


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
    print(label)
    for k, what in ((1, "CPU time"), (0, "wall time")):
        b, f = [t[k] for t in base], [t[k] for t in flux]
        best = min(f) / min(b)
        paired = statistics.median(x / y for x, y in zip(f, b, strict=True))
        print(
            f"  {what}: InMemorySaver {min(b):.3f} s, FluxCheckpointer {min(f):.3f} s, "
            f"ratio {best:.2f} x, median paired ratio {paired:.2f} x (target < 1.3)"
        )
    return min(t[1] for t in flux) / min(t[1] for t in base)


if __name__ == "__main__":
    compare(f"{STEPS} super-steps x 1 task", chain, STEPS)
    compare(f"{WIDE_STEPS} super-steps x {WIDTH} tasks", wide, WIDTH * WIDE_STEPS // 2)
