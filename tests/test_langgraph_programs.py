"""FluxCheckpointer on real LangGraph programs, each run many times, sync and async.

Every program logs what its nodes really did (started, finished, raised, interrupted); the
mirrored graph must say exactly that, every time: one step node per execution with its status,
under the right super-step, model calls under their node, reruns depending on what they rerun,
nothing left running. A wrapper checkpointer delivers LangGraph's calls out of order (writes
after the next checkpoint, or a seeded shuffle), as LangGraph's background saves may.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import operator
import os
import random
import threading
import time
from typing import Annotated, Any, TypedDict

import pytest

if os.environ.get("CI") != "true":
    pytest.importorskip("langgraph", reason="the langgraph extra is not installed")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, RetryPolicy, Send, interrupt

from fxtr.integrations import _langgraph_records as langgraph_records
from fxtr.integrations import langgraph as langgraph_adapter
from fxtr.integrations.langgraph import FluxCheckpointer
from fxtr.models import MockModelAPI
from fxtr.tracing import Client

REPEAT = 50
"""Runs of each program as LangGraph delivers its calls; reordered deliveries run fewer."""
REORDERED_REPEAT = 20
MODES = ["invoke", "ainvoke"]
ORDERS = ["as-is", "writes-late", "shuffled", "no-handler"]
"""How LangGraph's calls reach the mirror; ``no-handler``: with no callback handler in the
run (a run started from a context the checkpointer was never used in), the checkpointer's
own calls alone."""


class State(TypedDict):
    items: Annotated[list, operator.add]


class Log:
    """What the nodes really did, in order: (name, "ok" | "raised" | "interrupted" | "cut")."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str]] = []

    def add(self, name: str, outcome: str) -> None:
        with self.lock:
            self.events.append((name, outcome))


STATUS = {"ok": "succeeded", "raised": "failed", "interrupted": "interrupted", "cut": "cancelled"}


class Reordering(FluxCheckpointer):
    """Delivers ``put`` / ``put_writes`` (storage and mirror alike) out of order.

    ``writes-late``: a task's writes wait until after the next checkpoint (or the next run).
    ``shuffled``: calls wait in a pool released in a seeded random order. Everything held is
    delivered before any read, so LangGraph always sees a complete store.
    """

    def __init__(self, client: Client, order: str, seed: int) -> None:
        super().__init__(client)
        self.order = order
        self.rng = random.Random(seed)
        self.held: list[tuple[Any, tuple[Any, ...]]] = []
        self.hold_lock = threading.RLock()

    def put(self, config, checkpoint, metadata, new_versions):
        if self.order == "as-is":
            return super().put(config, checkpoint, metadata, new_versions)
        with self.hold_lock:
            result = {
                "configurable": {
                    "thread_id": config["configurable"]["thread_id"],
                    "checkpoint_ns": config["configurable"].get("checkpoint_ns", ""),
                    "checkpoint_id": checkpoint["id"],
                }
            }
            if self.order == "writes-late":
                super().put(config, checkpoint, metadata, new_versions)
                self.flush()
            else:
                self.held.append(
                    (FluxCheckpointer.put, (config, checkpoint, metadata, new_versions))
                )
                self.release()
            return result

    def put_writes(self, config, writes, task_id, task_path=""):
        if self.order == "as-is":
            return super().put_writes(config, writes, task_id, task_path)
        with self.hold_lock:
            self.held.append((FluxCheckpointer.put_writes, (config, writes, task_id, task_path)))
            if self.order == "shuffled":
                self.release()
        return None

    def release(self) -> None:
        """Deliver a random part of the pool, in a random order."""
        self.rng.shuffle(self.held)
        keep = self.rng.randint(0, len(self.held))
        out, self.held = self.held[keep:], self.held[:keep]
        for method, args in out:
            method(self, *args)

    def flush(self) -> None:
        with self.hold_lock:
            out, self.held = self.held, []
            if self.order == "shuffled":
                self.rng.shuffle(out)
            for method, args in out:
                method(self, *args)

    def get_tuple(self, config):
        self.flush()
        return super().get_tuple(config)

    def list(self, *args, **kwargs):
        self.flush()
        return super().list(*args, **kwargs)


def repeats(order: str, n: int = REPEAT) -> range:
    return range(n if order == "as-is" else min(n, REORDERED_REPEAT))


def saver(client: Client, order: str, seed: int) -> FluxCheckpointer:
    if order == "as-is":
        return FluxCheckpointer(client)
    if order == "no-handler":
        checkpointer = FluxCheckpointer(client)
        checkpointer.order = order  # type: ignore[attr-defined]
        return checkpointer
    return Reordering(client, order, seed)


def run(app, value, config, mode):
    """Run once; like LangGraph, deliver every held save before returning (or raising)."""

    def call():
        if mode == "invoke":
            return app.invoke(value, config)
        return asyncio.run(app.ainvoke(value, config))

    try:
        if getattr(app.checkpointer, "order", None) == "no-handler":
            context = contextvars.copy_context()
            context.run(langgraph_adapter._watching.set, None)
            return context.run(call)
        return call()
    finally:
        if isinstance(app.checkpointer, Reordering):
            app.checkpointer.flush()


def steps(graph) -> list[tuple[str, str]]:
    return [(n.name, n.status) for n in graph.find(kind="step")]


def check_graph(graph, log: Log, *, unstarted: bool = False) -> None:
    """The invariants every mirrored graph keeps, and the steps equal the log.

    ``unstarted``: a sync task may also be ``cancelled`` without a line in the log, when
    LangGraph cancelled its future before a worker thread started it (a sibling raised).
    """
    expected = [(name, STATUS[outcome]) for name, outcome in log.events]
    found = steps(graph)
    if unstarted:  # leave out the cancelled steps the log does not account for
        extra = collections.Counter(found) - collections.Counter(expected)
        cut = collections.Counter({s: n for s, n in extra.items() if s[1] == "cancelled"})
        found = list((collections.Counter(found) - cut).elements())
    assert sorted(found) == sorted(expected), (steps(graph), expected)
    for node in graph.nodes:
        assert node.status != "running", node
        if node.kind == "step":
            assert graph.node(node.parent_id).kind == "superstep"
        if node.kind == "superstep":
            latest = {c.attrs["langgraph_task_id"]: c.status for c in graph.children(node.id)}
            children = list(latest.values())  # the last attempt of each task
            assert (node.status == "failed") == ("failed" in children), (node, children)
            assert node.name.startswith("superstep ") and node.name[10:].isdigit()
        for dep in node.depends_on:
            earlier = graph.node(dep)
            assert earlier.name == node.name
            assert earlier.status in ("failed", "interrupted", "cancelled")


def supersteps(graph) -> list:
    """Super-step nodes by their LangGraph number (then as made: a rerun after the run it
    reruns). Without the handler, nodes are made as LangGraph's saves arrive."""
    found = graph.find(kind="superstep")
    return sorted(found, key=lambda n: (int(n.name.split()[1]), found.index(n)))


def check_order(graph, log: Log) -> None:
    """Sequential programs: super-step by super-step, the nodes that ran, in order."""
    expected = [(name, STATUS[outcome]) for name, outcome in log.events]
    ran = [(c.name, c.status) for s in supersteps(graph) for c in graph.children(s.id)]
    assert ran == expected


def check_model_calls_under(graph, names: list[str]) -> None:
    calls = graph.find(kind="model_call")
    assert [graph.node(c.parent_id).name for c in calls] == names
    for call in calls:
        assert graph.node(call.parent_id).kind == "step"


# the programs ---------------------------------------------------------------------------


def agent_program(flux: Client, log: Log, mode: str) -> StateGraph:
    """A tool-calling agent: the model asks for tools twice, then answers."""

    class AgentState(TypedDict):
        messages: Annotated[list, operator.add]

    async def think(state):
        reply = await flux.messages.create(
            model="m", messages=[{"role": "user", "content": " ".join(state["messages"])}]
        )
        log.add("agent", "ok")
        return {"messages": [reply.text]}

    def agent(state):
        if mode == "ainvoke":
            return think(state)
        return asyncio.run(think(state))

    async def aagent(state):
        return await think(state)

    def tools(state):
        _, a, b = state["messages"][-1].split()
        log.add("tools", "ok")
        return {"messages": [str(int(a) + int(b))]}

    def route(state):
        return "tools" if state["messages"][-1].startswith("CALL") else END

    g = StateGraph(AgentState)
    g.add_node("agent", aagent if mode == "ainvoke" else agent)
    g.add_node("tools", tools)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route, ["tools", END])
    g.add_edge("tools", "agent")
    return g


AGENT_REPLIES = ["CALL 2 3", "CALL 5 1", "The answer is 6"]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_tool_calling_agent(mode, order):
    """agent, tools, agent, tools, agent; each model call under its agent node."""
    for i in repeats(order):
        flux = Client({"m": MockModelAPI("m", list(AGENT_REPLIES))})
        log = Log()
        app = agent_program(flux, log, mode).compile(checkpointer=saver(flux, order, i))
        with flux.task("agent") as t:
            out = run(app, {"messages": ["add"]}, {"configurable": {"thread_id": "a"}}, mode)
        assert out["messages"][-1] == "The answer is 6"
        graph = flux.get_task_graph(t.task_id)
        check_graph(graph, log)
        check_order(graph, log)
        if order != "no-handler":
            check_model_calls_under(graph, ["agent", "agent", "agent"])
        assert [n.name for n in supersteps(graph)] == [f"superstep {k}" for k in range(1, 6)]


def raising_program(log: Log, broken: dict, flux: Client | None = None) -> StateGraph:
    """a -> b -> c; a node named in ``broken`` raises (after its model call, given a client)."""

    def node(name):
        def fn(state):
            if flux is not None:
                messages = [{"role": "user", "content": name}]
                asyncio.run(flux.messages.create(model="m", messages=messages))
            if broken.get(name):
                log.add(name, "raised")
                raise ValueError(f"{name} is broken")
            log.add(name, "ok")
            return {"items": [name]}

        return fn

    g = StateGraph(State)
    for name in "abc":
        g.add_node(name, node(name))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    return g


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_node_raises_then_invoke_none(mode, order):
    """b fails (tool_error, its message), the rerun of b depends on it, c runs once."""
    for i in repeats(order):
        flux = Client({"m": MockModelAPI("m", "x")})
        log, broken = Log(), {"b": True}
        app = raising_program(log, broken).compile(checkpointer=saver(flux, order, i))
        config = {"configurable": {"thread_id": "r"}}
        with flux.task("pipeline") as t:
            with pytest.raises(ValueError, match="b is broken"):
                run(app, {"items": []}, config, mode)
            broken["b"] = False
            assert run(app, None, config, mode) == {"items": ["a", "b", "c"]}
        graph = flux.get_task_graph(t.task_id)
        check_graph(graph, log)
        check_order(graph, log)
        failed, retried = graph.find(name="b")
        assert failed.reason == "tool_error" and failed.error == "ValueError: b is broken"
        assert retried.depends_on == [failed.id]
        first, second = [n for n in graph.find(kind="superstep") if n.name == "superstep 2"]
        assert (first.status, second.status) == ("failed", "succeeded")
        assert second.attrs.get("resumed_from") == first.id


def sibling_program(log: Log, broken: dict, mode: str) -> StateGraph:
    """START -> slow, bad: bad raises while slow is running."""

    def slow(state):
        time.sleep(0.02)
        log.add("slow", "ok")
        return {"items": ["slow"]}

    async def aslow(state):
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            log.add("slow", "cut")
            raise
        log.add("slow", "ok")
        return {"items": ["slow"]}

    def bad(state):
        if broken["on"]:
            log.add("bad", "raised")
            raise KeyError("missing key")
        log.add("bad", "ok")
        return {"items": ["bad"]}

    g = StateGraph(State)
    g.add_node("slow", aslow if mode == "ainvoke" else slow)
    g.add_node("bad", bad)
    g.add_edge(START, "slow")
    g.add_edge(START, "bad")
    return g


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_failing_sibling_cuts_the_other_short(mode, order):
    """A sibling LangGraph cancels is ``cancelled`` (async), one that finished succeeded
    (sync), and neither comes back as a rerun from its late write."""
    for i in repeats(order, REPEAT // 5):
        flux = Client({"m": MockModelAPI("m", "x")})
        log, broken = Log(), {"on": True}
        app = sibling_program(log, broken, mode).compile(checkpointer=saver(flux, order, i))
        config = {"configurable": {"thread_id": "s"}}
        with flux.task("fan") as t:
            with pytest.raises(KeyError):
                run(app, {"items": []}, config, mode)
            broken["on"] = False
            run(app, None, config, mode)
        graph = flux.get_task_graph(t.task_id)
        check_graph(graph, log, unstarted=mode == "invoke")
        first = graph.find(kind="superstep")[0]
        assert first.status == "failed" and first.reason == "tool_error"
        expected_slow = "cancelled" if mode == "ainvoke" else "succeeded"
        assert graph.find(name="slow")[0].status == expected_slow


def test_a_sync_task_cancelled_before_it_started_is_cancelled_not_failed():
    """When a sibling raises, LangGraph cancels the future of a sync task no worker thread
    started yet, and commits ``concurrent.futures.CancelledError`` (not asyncio's) as its
    ``__error__``: the task never ran, so it is ``cancelled``, and its rerun depends on it.
    The node raises that error itself here: the same commit, without the thread race."""
    flux = Client({"m": MockModelAPI("m", "x")})
    cut = {"on": True}

    def waits(state):
        if cut["on"]:
            raise concurrent.futures.CancelledError
        return {"items": ["waits"]}

    g = StateGraph(State)
    g.add_node("waits", waits)
    g.add_edge(START, "waits")
    app = g.compile(checkpointer=FluxCheckpointer(flux))
    config = {"configurable": {"thread_id": "c"}}
    with flux.task("cut") as t:
        with pytest.raises(concurrent.futures.CancelledError):
            app.invoke({"items": []}, config)
        cut["on"] = False
        app.invoke(None, config)
    graph = flux.get_task_graph(t.task_id)
    assert steps(graph) == [("waits", "cancelled"), ("waits", "succeeded")]
    first, rerun = graph.find(kind="step")
    assert rerun.depends_on == [first.id]


def send_program(log: Log) -> StateGraph:
    """Three Send packets to one worker; the second one asks for approval."""

    def fan(state):
        return [Send("worker", {"items": [str(k)]}) for k in range(3)]

    def worker(state):
        if state["items"] == ["1"]:
            try:
                answer = interrupt("approve?")
            except BaseException:
                log.add("worker", "interrupted")
                raise
            log.add("worker", "ok")
            return {"items": [answer]}
        log.add("worker", "ok")
        return {"items": ["w"]}

    g = StateGraph(State)
    g.add_node("worker", worker)
    g.add_conditional_edges(START, fan, ["worker"])
    return g


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_interrupt_resume_and_send(mode, order):
    """Three Send workers, one interrupts; Command(resume=...) reruns only that one."""
    for i in repeats(order):
        flux = Client({"m": MockModelAPI("m", "x")})
        log = Log()
        app = send_program(log).compile(checkpointer=saver(flux, order, i))
        config = {"configurable": {"thread_id": "i"}}
        with flux.task("approve") as t:
            first = run(app, {"items": []}, config, mode)
            assert "__interrupt__" in first
            done = run(app, Command(resume="yes"), config, mode)
        assert sorted(done["items"]) == ["w", "w", "yes"]
        graph = flux.get_task_graph(t.task_id)
        check_graph(graph, log)
        interrupted = graph.find(name="worker", status="interrupted")
        assert len(interrupted) == 1
        resumed = [n for n in graph.find(name="worker") if n.depends_on]
        assert [n.depends_on for n in resumed] == [[interrupted[0].id]]
        assert resumed[0].status == "succeeded"


def join_program(log: Log) -> StateGraph:
    """START -> a, b; [a, b] -> j (a join edge); j -> c."""

    def node(name):
        def fn(state):
            log.add(name, "ok")
            return {"items": [name]}

        return fn

    g = StateGraph(State)
    for name in "abjc":
        g.add_node(name, node(name))
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge(["a", "b"], "j")
    g.add_edge("j", "c")
    return g


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_join_edges(mode, order):
    """The task a join edge triggers is recorded, and the one after it, in order."""
    for i in repeats(order):
        flux = Client({"m": MockModelAPI("m", "x")})
        log = Log()
        app = join_program(log).compile(checkpointer=saver(flux, order, i))
        with flux.task("join") as t:
            run(app, {"items": []}, {"configurable": {"thread_id": "j"}}, mode)
        graph = flux.get_task_graph(t.task_id)
        check_graph(graph, log)
        by_step = [
            sorted(c.name for c in graph.children(s.id)) for s in graph.find(kind="superstep")
        ]
        assert by_step == [["a", "b"], ["j"], ["c"]]


def functional_program(flux: Client, log: Log, checkpointer: FluxCheckpointer, mode: str):
    """An @entrypoint calling @task functions (async: one of them calls a model)."""

    @task
    def double(x: int) -> int:
        log.add("double", "ok")
        return 2 * x

    @task
    async def ask(x: int) -> str:
        reply = await flux.messages.create(
            model="m", messages=[{"role": "user", "content": str(x)}]
        )
        log.add("ask", "ok")
        return reply.text

    @entrypoint(checkpointer=checkpointer)
    async def workflow(n: int) -> str:
        total = sum([await double(k) for k in range(n)])
        answer = await ask(total)
        log.add("workflow", "ok")
        return answer

    @entrypoint(checkpointer=checkpointer)
    def sync_workflow(n: int) -> str:
        total = sum(f.result() for f in [double(k) for k in range(n)])
        log.add("sync_workflow", "ok")
        return str(total)

    return workflow if mode == "ainvoke" else sync_workflow


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_functional_api(mode, order):
    """One node for the entrypoint and one per @task call (named ``task``); a model call made
    in a @task goes under the entrypoint's node, the task that called it."""
    for i in repeats(order):
        flux = Client({"m": MockModelAPI("m", "4")})
        log = Log()
        app = functional_program(flux, log, saver(flux, order, i), mode)
        with flux.task("functional") as t:
            out = run(app, 3, {"configurable": {"thread_id": "f"}}, mode)
        assert out == ("4" if mode == "ainvoke" else "6")
        graph = flux.get_task_graph(t.task_id)
        # LangGraph names no @task call to a checkpointer, nor reliably to a callback handler
        log.events = [(n if n.endswith("workflow") else "task", o) for n, o in log.events]
        check_graph(graph, log)
        if mode == "ainvoke" and order != "no-handler":
            check_model_calls_under(graph, ["workflow"])  # under the task that made the call
        (entry,) = graph.find(kind="superstep")
        assert len(graph.children(entry.id)) == len(log.events)


@pytest.mark.parametrize("mode", MODES)
def test_durability_exit_produces_a_graph(mode):
    """With durability="exit" LangGraph saves once, at the end: the graph is still there."""
    for _ in range(REPEAT):
        flux = Client({"m": MockModelAPI("m", "x")})
        log, broken = Log(), {}
        app = raising_program(log, broken).compile(checkpointer=FluxCheckpointer(flux))
        config = {"configurable": {"thread_id": "x"}}
        with flux.task("exit") as t:
            if mode == "invoke":
                app.invoke({"items": []}, config, durability="exit")
            else:
                asyncio.run(app.ainvoke({"items": []}, config, durability="exit"))
        graph = flux.get_task_graph(t.task_id)
        check_graph(graph, log)
        check_order(graph, log)
        assert [n.name for n in graph.find(kind="superstep")] == [
            "superstep 1",
            "superstep 2",
            "superstep 3",
        ]


def test_failing_middle_node_with_durability_exit_then_resume():
    """The failure saved at exit is recorded; the resume reruns b with depends_on."""
    flux = Client({"m": MockModelAPI("m", "x")})
    log, broken = Log(), {"b": True}
    app = raising_program(log, broken).compile(checkpointer=FluxCheckpointer(flux))
    config = {"configurable": {"thread_id": "x"}}
    with flux.task("exit") as t:
        with pytest.raises(ValueError):
            app.invoke({"items": []}, config, durability="exit")
        broken["b"] = False
        app.invoke(None, config, durability="exit")
    graph = flux.get_task_graph(t.task_id)
    check_graph(graph, log)
    failed, retried = graph.find(name="b")
    assert retried.depends_on == [failed.id]


def flaky_program(log: Log) -> StateGraph:
    """One node that fails twice, under a RetryPolicy of three attempts."""
    attempts = []

    def flaky(state):
        attempts.append(1)
        if len(attempts) < 3:
            log.add("flaky", "raised")
            raise ValueError("not yet")
        log.add("flaky", "ok")
        return {"items": ["done"]}

    g = StateGraph(State)
    policy = RetryPolicy(max_attempts=3, initial_interval=0.001, jitter=False, retry_on=ValueError)
    g.add_node("flaky", flaky, retry_policy=policy)
    g.add_edge(START, "flaky")
    return g


@pytest.mark.parametrize("order", ["as-is", "no-handler"])
@pytest.mark.parametrize("mode", MODES)
def test_retry_policy_attempts(mode, order):
    """Each RetryPolicy attempt is a node depending on the one before; the super-step
    succeeds with the last attempt. Without the handler only the last outcome is known."""
    for i in repeats(order, REPEAT // 5):
        flux = Client({"m": MockModelAPI("m", "x")})
        log = Log()
        app = flaky_program(log).compile(checkpointer=saver(flux, order, i))
        with flux.task("retry") as t:
            run(app, {"items": []}, {"configurable": {"thread_id": "retry"}}, mode)
        graph = flux.get_task_graph(t.task_id)
        if order == "no-handler":
            log.events = log.events[-1:]
        check_graph(graph, log)
        check_order(graph, log)
        nodes = graph.find(name="flaky")
        assert [n.depends_on for n in nodes] == [[]] + [[n.id] for n in nodes[:-1]]
        assert [n.reason for n in nodes if n.status == "failed"] == ["tool_error"] * (
            len(nodes) - 1
        )
        (step,) = graph.find(kind="superstep")
        assert step.status == "succeeded"


# tasks that never ran -------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_breakpoint_and_update_state_record_only_what_ran(mode):
    """interrupt_before=["b"] + update_state: b is not a node until it really runs."""
    flux = Client({"m": MockModelAPI("m", "x")})
    log = Log()
    app = raising_program(log, {}).compile(
        checkpointer=FluxCheckpointer(flux), interrupt_before=["b"]
    )
    config = {"configurable": {"thread_id": "bp"}}
    run(app, {"items": []}, config, mode)
    graph = flux.get_task_graph("langgraph-bp")
    assert steps(graph) == [("a", "succeeded")]
    assert all(n.status != "running" for n in graph.nodes)
    app.update_state(config, {"items": ["edited"]})
    assert steps(graph) == [("a", "succeeded")]
    assert run(app, None, config, mode) == {"items": ["a", "edited", "b", "c"]}
    check_graph(graph, log)
    check_order(graph, log)


@pytest.mark.parametrize("mode", MODES)
def test_recursion_limit_leaves_nothing_running(mode):
    """GraphRecursionError: every step that ran is closed, no planned step is invented."""
    flux = Client({"m": MockModelAPI("m", "x")})
    log = Log()

    def loop(state):
        log.add("loop", "ok")
        return {"items": ["x"]}

    g = StateGraph(State)
    g.add_node("loop", loop)
    g.add_edge(START, "loop")
    g.add_edge("loop", "loop")
    app = g.compile(checkpointer=FluxCheckpointer(flux))
    config = {"configurable": {"thread_id": "rec"}, "recursion_limit": 4}
    with pytest.raises(GraphRecursionError):
        run(app, {"items": []}, config, mode)
    graph = flux.get_task_graph("langgraph-rec")
    check_graph(graph, log)
    (root,) = graph.find(kind="task")
    assert root.status == "failed" and root.error.startswith("GraphRecursionError")


@pytest.mark.parametrize("order", ["as-is", "no-handler"])
def test_the_threads_own_task_ends_after_every_run(order):
    """Outside client.task(), the thread's task is ended after each run and reopened by the next."""
    flux = Client({"m": MockModelAPI("m", "x")})
    log, broken = Log(), {"b": True}
    app = raising_program(log, broken).compile(checkpointer=saver(flux, order, 0))
    config = {"configurable": {"thread_id": "own"}}
    with pytest.raises(ValueError):
        run(app, {"items": []}, config, "invoke")
    (root,) = flux.get_task_graph("langgraph-own").find(kind="task")
    assert (root.status, root.reason) == ("failed", "tool_error")
    broken["b"] = False
    run(app, None, config, "invoke")
    assert root.status == "succeeded" and root.ended_at is not None
    check_graph(flux.get_task_graph("langgraph-own"), log)


# scopes and bookkeeping -----------------------------------------------------------------


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_resume_in_another_task_depends_on_the_failed_node(mode, order):
    """Fail in one client.task(), resume with invoke(None, config) in another (issue 28
    item 5): the rerun is in the second graph with ``depends_on`` = the failed node of the
    first (``depends_on_task`` names that graph), and b is recorded failed exactly once."""
    for i in repeats(order, REORDERED_REPEAT):
        flux = Client({"m": MockModelAPI("m", "x")})
        log, broken = Log(), {"b": True}
        app = raising_program(log, broken).compile(checkpointer=saver(flux, order, i))
        config = {"configurable": {"thread_id": "two"}}
        with flux.task("first") as first:
            with pytest.raises(ValueError):
                run(app, {"items": []}, config, mode)
        broken["b"] = False
        with flux.task("second") as second:
            assert run(app, None, config, mode) == {"items": ["a", "b", "c"]}
        one, two = flux.get_task_graph(first.task_id), flux.get_task_graph(second.task_id)
        assert log.events == [("a", "ok"), ("b", "raised"), ("b", "ok"), ("c", "ok")]
        assert steps(one) == [("a", "succeeded"), ("b", "failed")]
        assert steps(two) == [("b", "succeeded"), ("c", "succeeded")]
        (failed,) = one.find(name="b")
        (rerun,) = two.find(name="b")
        assert failed.error == "ValueError: b is broken"
        assert rerun.depends_on == [failed.id]
        assert rerun.attrs["depends_on_task"] == first.task_id
        (c,) = two.find(name="c")
        assert c.depends_on == [] and "depends_on_task" not in c.attrs


@pytest.mark.parametrize("mode", MODES)
def test_resume_in_another_task_read_back_from_the_store(mode, tmp_path):
    """The same, read back by another client from the store: one failed b, one rerun."""
    for i in range(REORDERED_REPEAT):
        store = tmp_path / f"s{i}"
        flux = Client({"m": MockModelAPI("m", "x")}, store=str(store))
        log, broken = Log(), {"b": True}
        app = raising_program(log, broken).compile(checkpointer=FluxCheckpointer(flux))
        config = {"configurable": {"thread_id": "two"}}
        with flux.task("first") as first:
            with pytest.raises(ValueError):
                run(app, {"items": []}, config, mode)
        broken["b"] = False
        with flux.task("second") as second:
            run(app, None, config, mode)
        reader = Client({"m": MockModelAPI("m", "x")}, store=str(store))
        one, two = reader.get_task_graph(first.task_id), reader.get_task_graph(second.task_id)
        assert [n.status for n in one.find(name="b")] == ["failed"]
        (failed,) = one.find(name="b")
        assert [(n.status, n.depends_on) for n in two.find(name="b")] == [
            ("succeeded", [failed.id])
        ]


@pytest.mark.parametrize("mode", MODES)
def test_resume_in_the_same_task_read_back_from_the_store(mode, tmp_path):
    """b raises, invoke(None, config) in the same task: the stored graph has one failed b."""
    for i in range(REORDERED_REPEAT):
        store = tmp_path / f"s{i}"
        flux = Client({"m": MockModelAPI("m", "x")}, store=str(store))
        log, broken = Log(), {"b": True}
        app = raising_program(log, broken).compile(checkpointer=FluxCheckpointer(flux))
        config = {"configurable": {"thread_id": "one"}}
        with flux.task("pipeline") as t:
            with pytest.raises(ValueError):
                run(app, {"items": []}, config, mode)
            broken["b"] = False
            run(app, None, config, mode)
        reader = Client({"m": MockModelAPI("m", "x")}, store=str(store))
        graph = reader.get_task_graph(t.task_id)
        assert log.events == [("a", "ok"), ("b", "raised"), ("b", "ok"), ("c", "ok")]
        assert [(n.name, n.status) for n in graph.find(kind="step")] == [
            ("a", "succeeded"), ("b", "failed"), ("b", "succeeded"), ("c", "succeeded")
        ]
        failed, rerun = graph.find(name="b")
        assert rerun.depends_on == [failed.id]


def test_subgraph_supersteps_go_under_their_task():
    """A subgraph's super-steps are children of the parent's task node, found by task id."""
    flux = Client({"m": MockModelAPI("m", "x")})

    def inner(state):
        asyncio.run(flux.messages.create(model="m", messages=[{"role": "user", "content": "q"}]))
        return {"items": ["inner"]}

    sub = StateGraph(State)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")
    g = StateGraph(State)
    g.add_node("first", sub.compile())
    g.add_node("second", sub.compile())
    g.add_edge(START, "first")
    g.add_edge("first", "second")
    app = g.compile(checkpointer=FluxCheckpointer(flux))
    with flux.task("nested") as t:
        app.invoke({"items": []}, {"configurable": {"thread_id": "nested"}})
    graph = flux.get_task_graph(t.task_id)
    for name in ("first", "second"):
        (outer,) = graph.find(kind="step", name=name)
        (inner_step,) = graph.children(graph.children(outer.id)[0].id)
        assert inner_step.name == "inner" and inner_step.status == "succeeded"
        assert [c.kind for c in graph.children(inner_step.id)] == ["model_call"]
    assert all(n.status != "running" for n in graph.nodes)


def test_delete_thread_clears_the_bookkeeping_and_it_stays_bounded(monkeypatch):
    """A long thread keeps at most MAX_TASKS task records; delete_thread drops them all."""
    monkeypatch.setattr(langgraph_records, "MAX_TASKS", 64)  # read where they live
    monkeypatch.setattr(langgraph_records, "MAX_STEPS", 32)
    flux = Client({"m": MockModelAPI("m", "x")})
    checkpointer = FluxCheckpointer(flux)

    def tick(state):
        return {"items": [1]}

    def more(state):
        return "tick" if len(state["items"]) < 300 else END

    g = StateGraph(State)
    g.add_node("tick", tick)
    g.add_edge(START, "tick")
    g.add_conditional_edges("tick", more, ["tick", END])
    app = g.compile(checkpointer=checkpointer)
    config = {"configurable": {"thread_id": "long"}, "recursion_limit": 10_000}
    app.invoke({"items": []}, config)
    state = checkpointer._threads["long"]
    assert len(state.tasks) <= 64
    assert len(state.steps) <= 32 and len(state.numbers) <= 32 and len(state.sends) <= 32
    assert not state.open
    assert len(flux.get_task_graph("langgraph-long").find(kind="step")) == 300
    checkpointer.delete_thread("long")
    assert "long" not in checkpointer._threads
    assert checkpointer.get_tuple(config) is None


def test_a_graph_with_another_checkpointer_is_not_mirrored():
    """After a mirrored run, a graph on InMemorySaver in the same context stays unrecorded."""
    flux = Client({"m": MockModelAPI("m", "x")})
    log = Log()
    mirrored = raising_program(log, {}).compile(checkpointer=FluxCheckpointer(flux))
    plain = raising_program(Log(), {}).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "same"}}
    with flux.task("only mine") as t:
        mirrored.invoke({"items": []}, config)
        plain.invoke({"items": []}, config)
    check_graph(flux.get_task_graph(t.task_id), log)


def test_threads_running_at_once_each_get_their_own_graph():
    """Eight Python threads (each a first run in a fresh context) share one checkpointer,
    each on its own LangGraph thread: every graph is exactly its own run, model calls included."""
    flux = Client({"m": MockModelAPI("m", "x")})
    checkpointer = FluxCheckpointer(flux)
    results, errors = {}, []

    def one(k: int) -> None:
        try:
            log, broken = Log(), {"b": True}
            app = raising_program(log, broken, flux).compile(checkpointer=checkpointer)
            config = {"configurable": {"thread_id": f"t{k}"}}
            with flux.task(f"run {k}") as t:
                try:
                    app.invoke({"items": []}, config)
                except ValueError:
                    pass
                broken["b"] = False
                app.invoke(None, config)
            results[k] = (t.task_id, log)
        except BaseException as exc:  # reported below, from the test's own thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for task_id, log in results.values():
        graph = flux.get_task_graph(task_id)
        check_graph(graph, log)
        check_order(graph, log)
        check_model_calls_under(graph, ["a", "b", "b", "c"])
