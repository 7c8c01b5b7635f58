"""``FluxCheckpointer``: LangGraph's in-memory saver that mirrors runs into an fxtr graph.

``graph.compile(checkpointer=FluxCheckpointer(client))`` in place of ``InMemorySaver()``:
checkpoints are stored exactly as the in-memory saver stores them (it *is* one), and each
super-step becomes a ``superstep N`` node with one ``step`` node per LangGraph task that ran,
under the current ``client.task()`` (or a task per LangGraph thread id).

What the mirror is told, and by whom:

- ``put_writes(config, writes, task_id, task_path)``: a task finished. ``config`` names the
  checkpoint its super-step started from, ``task_id`` is LangGraph's own id for the task
  (derived from that checkpoint, so a rerun of the same task has the same id). An
  ``__error__`` write carries the exception (a ``CancelledError`` for a sibling LangGraph cut
  short), ``__interrupt__`` an ``interrupt()``.
- ``put(config, checkpoint, metadata)``: a super-step completed; ``config`` names the
  checkpoint it started from (its lineage parent), so every task of that super-step that is
  still open succeeded.
- ``get_tuple(config)`` at the start of every run (and of every subgraph run): a new attempt
  of that thread and namespace; work recorded by an earlier attempt is final.
- A LangChain callback handler (LangGraph runs every task as a LangChain run): a task
  started (its real start time; model calls and ``client.step`` blocks made inside the node
  go under its node), ended, or raised (every ``RetryPolicy`` attempt is a node); the graph's
  run ended. Importing this module installs the one handler for the process, through
  ``langchain_core``'s configure hook; it ignores every run that is not a task of a graph
  whose loop a ``FluxCheckpointer`` opened. Where it is turned off, the checkpointer's calls
  alone still give every outcome.

Events are matched by LangGraph's task ids and checkpoint lineage, never by arrival order:
writes may arrive before their super-step's checkpoint or after the next one (LangGraph saves
in the background). A task id already recorded as finished in an earlier attempt (after
``invoke(None, config)`` or ``Command(resume=...)``) is a new node whose ``depends_on`` is the
earlier node, when both are in the same task graph.

Known limits: errors raised outside any task (input validation, the graph's own code,
``GraphRecursionError``) are not tasks (they fail the thread's own task). Without the
handler: a node that writes nothing is not seen, start times are the super-step's, model
calls made in nodes stay under the enclosing task, ``@task`` calls are named ``task``, only
a ``RetryPolicy``'s last attempt is seen, ``durability="exit"`` shows only the last
super-step, and nodes are made in the order LangGraph's saves arrive (super-step numbers give
the order). Recording is synchronous and thread-safe, and never fails the user's run: a
bookkeeping error is logged and swallowed.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
import threading
import uuid
from collections.abc import Sequence
from typing import Any

try:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.tracers.context import register_configure_hook
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.errors import GraphBubbleUp, GraphInterrupt
except ImportError as exc:  # pragma: no cover - exercised without the extra
    msg = (
        "fxtr.integrations.langgraph needs LangGraph, which is not installed. Install it "
        "with `pip install 'fxtr[langgraph]'`."
    )
    raise ImportError(msg) from exc

from fxtr.tracing._client import Client, TaskScope
from fxtr.tracing._graph import Node, NodeStatus, TaskGraph
from fxtr.tracing._recorder import current_frame

log = logging.getLogger("fxtr.langgraph")

ERROR = "__error__"
INTERRUPT = "__interrupt__"
RESUME = "__resume__"
SCHEDULED = "__scheduled__"
TASKS = "__pregel_tasks"
PULL = "__pregel_pull"
PUSH = "__pregel_push"
_BOOKKEEPING = frozenset({RESUME, SCHEDULED, "__error_source_node__"})
"""Channels LangGraph writes for a task that say nothing about how it ran."""
_OUTCOMES = frozenset({ERROR, INTERRUPT})
_INTERNAL = frozenset({"__start__", "__end__"})
MAX_TASKS = 2048
"""Task records kept per thread (then the oldest are dropped: a rerun of a task that old is
recorded without ``depends_on``)."""
MAX_RUNS = 4096
"""LangChain runs the handler keeps (graph runs claimed, tasks running); the oldest go first."""
MAX_STEPS = 512
"""Super-step records (and checkpoint numbers, ``Send`` packets) kept per thread; open
super-steps are kept apart until they close."""

__all__ = ["FluxCheckpointer"]

Frame = tuple[TaskGraph, str]


class _Step:
    """One execution of a super-step: its node and the tasks that ran in it."""

    def __init__(
        self, ns: str, number: int | None, generation: int, graph: TaskGraph, node: Node
    ) -> None:
        self.ns = ns
        self.number = number
        self.generation = generation
        self.checkpoint_id: str | None = None
        """The checkpoint it started from, once LangGraph named it."""
        self.graph = graph
        self.node = node
        self.tasks: list[_Task] = []
        self.closed = False


class _Task:
    """One execution of a LangGraph task (one node, one ``RetryPolicy`` attempt)."""

    def __init__(self, task_id: str, step: _Step, node: Node, generation: int) -> None:
        self.task_id = task_id
        self.step = step
        self.node = node
        self.generation = generation


class _Thread:
    """Everything the mirror keeps about one LangGraph thread id (bounded)."""

    def __init__(self) -> None:
        self.generation: dict[str, int] = {}
        """Attempt number by checkpoint namespace, raised at each run's ``get_tuple``."""
        self.scope: dict[str, Frame] = {}
        """Where the current run of a namespace records (for the root namespace)."""
        self.open: dict[str, list[_Step]] = {}
        """Super-steps not closed yet, by namespace."""
        self.steps: collections.OrderedDict[tuple[str, str], _Step] = collections.OrderedDict()
        """The last execution of the super-step started from each checkpoint."""
        self.numbers: collections.OrderedDict[tuple[str, str], int] = collections.OrderedDict()
        """Super-step number of the step that starts from each checkpoint."""
        self.sends: collections.OrderedDict[tuple[str, str], list[Any]] = collections.OrderedDict()
        """The ``Send`` packets stored in each checkpoint (they name its push tasks)."""
        self.completed: collections.OrderedDict[tuple[str, str], bool] = collections.OrderedDict()
        """Checkpoints a later one was saved after: their super-step completed."""
        self.tasks: collections.OrderedDict[str, _Task] = collections.OrderedDict()
        """The last execution of each task id."""
        self.root: TaskScope | None = None
        self.watched = False
        """The handler sees the current run of the root namespace (and will see it end)."""
        self.last_root_step: Node | None = None
        """The last super-step made under the thread's own task (its status is the task's)."""


class FluxCheckpointer(InMemorySaver):
    """A drop-in for ``InMemorySaver`` that mirrors every super-step into ``client``'s graph."""

    def __init__(self, client: Client, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.client = client
        self._lock = threading.RLock()
        self._threads: dict[str, _Thread] = {}

    # the calls LangGraph makes --------------------------------------------------------

    def get_tuple(self, config: Any) -> Any:
        """Read a checkpoint; when a run starts, begin a new attempt of its thread."""
        result = super().get_tuple(config)
        if _RUNTIME in config.get("configurable", {}):
            self._guard(self._on_run_start, config)
        return result

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        """Store the checkpoint, then close the super-steps it completes."""
        result = super().put(config, checkpoint, metadata, new_versions)
        self._guard(self._on_checkpoint, config, checkpoint, metadata)
        return result

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Store a task's writes, then mirror its outcome."""
        super().put_writes(config, writes, task_id, task_path)
        self._guard(self._on_writes, config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints and what the mirror kept about it."""
        super().delete_thread(thread_id)
        with self._lock:
            self._threads.pop(str(thread_id), None)

    def _guard(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:  # the user's run must never fail because of the mirror
            log.warning("fxtr could not mirror a LangGraph event", exc_info=True)
            return None

    # runs and scopes ------------------------------------------------------------------

    def _thread(self, thread_id: str) -> _Thread:
        state = self._threads.get(thread_id)
        if state is None:
            state = self._threads[thread_id] = _Thread()
        return state

    def _on_run_start(self, config: Any) -> None:
        configurable = config["configurable"]
        if "thread_id" not in configurable:
            return
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "") or ""
        watched = _WATCHER.claim(self, thread_id, ns)
        with self._lock:
            state = self._thread(thread_id)
            if not ns:
                state.watched = watched
            self._finish_attempt(state, ns)
            state.generation[ns] = state.generation.get(ns, 0) + 1
            if not ns:
                state.scope[ns] = self._frame_here(thread_id, state)

    def _on_run_end(self, thread_id: str, ns: str, error: BaseException | None) -> None:
        """The handler saw the run of ``ns`` end: what it left open is final.

        An error raised outside any task (``GraphRecursionError``, input validation) fails
        the thread's own task, when the run records there.
        """
        with self._lock:
            state = self._threads.get(thread_id)
            if state is None:
                return
            self._finish_attempt(state, ns)
            if not ns:
                state.watched = False
            root = state.root
            outside_tasks = error is not None and not isinstance(error, GraphBubbleUp)
            if outside_tasks and not ns and root is not None and root.node.status != "failed":
                if state.scope.get("") == (root.graph, root.node.id):
                    root.graph.end(root.node, "failed", error=error)
            self._settle_root(state)

    def _frame_here(self, thread_id: str, state: _Thread) -> Frame:
        frame = current_frame.get()
        if frame is not None:
            return frame
        if state.root is None:
            graph = self.client._new_graph(f"langgraph-{thread_id}")
            node = graph.start("task", f"langgraph thread {thread_id}", None)
            state.root = TaskScope(graph, node)
        return state.root.graph, state.root.node.id

    def _scope_for(self, thread_id: str, state: _Thread, ns: str) -> Frame:
        """Where a super-step of ``ns`` goes: under the task that runs the subgraph."""
        if ns:
            parent = state.tasks.get(_task_id_of(ns))
            if parent is not None:
                return parent.step.graph, parent.node.id
        scope = state.scope.get("")
        return scope if scope is not None else self._frame_here(thread_id, state)

    # super-steps ----------------------------------------------------------------------

    def _step(
        self,
        thread_id: str,
        state: _Thread,
        ns: str,
        checkpoint_id: str | None,
        number: int | None,
    ) -> _Step:
        """The current execution of a super-step, made when there is none."""
        generation = state.generation.get(ns, 0)
        if number is None and checkpoint_id is not None:
            number = state.numbers.get((ns, checkpoint_id))
        for step in state.open.get(ns, ()):
            if step.generation != generation:
                continue
            if checkpoint_id is not None and step.checkpoint_id == checkpoint_id:
                return step
            if number is not None and step.number == number:
                if step.checkpoint_id is None and checkpoint_id is not None:
                    self._learn_checkpoint(state, step, checkpoint_id)
                return step
        if checkpoint_id is not None and number is None:
            # A write whose checkpoint is not numbered yet, for a task the handler did not
            # see (a @task call): the one super-step the handler saw start and nothing has
            # anchored yet is the one running.
            unanchored = [
                s
                for s in state.open.get(ns, ())
                if s.generation == generation and s.checkpoint_id is None
            ]
            if len(unanchored) == 1 and (ns, checkpoint_id) not in state.steps:
                self._learn_checkpoint(state, unanchored[0], checkpoint_id)
                return unanchored[0]
        earlier = state.steps.get((ns, checkpoint_id)) if checkpoint_id is not None else None
        if earlier is not None and earlier.generation == generation:
            return earlier  # closed already: a late event of the same execution
        graph, parent = self._scope_for(thread_id, state, ns)
        attrs: dict[str, Any] = {"namespace": ns}
        if earlier is not None and earlier.graph is graph:
            attrs["resumed_from"] = earlier.node.id
        name = f"superstep {number}" if number is not None else "superstep"
        node = graph.start("superstep", name, parent, **attrs)
        step = _Step(ns, number, generation, graph, node)
        step.checkpoint_id = checkpoint_id
        state.open.setdefault(ns, []).append(step)
        if checkpoint_id is not None:
            self._remember(state, (ns, checkpoint_id), step)
        self._reopen_root(state, graph, parent, node)
        return step

    def _learn_checkpoint(self, state: _Thread, step: _Step, checkpoint_id: str) -> None:
        """A super-step the handler saw start learns the checkpoint it started from."""
        step.checkpoint_id = checkpoint_id
        earlier = state.steps.get((step.ns, checkpoint_id))
        if earlier is not None and earlier is not step and earlier.graph is step.graph:
            step.node.attrs.setdefault("resumed_from", earlier.node.id)
        self._remember(state, (step.ns, checkpoint_id), step)

    def _remember(self, state: _Thread, key: tuple[str, str], step: _Step) -> None:
        state.steps[key] = step
        state.steps.move_to_end(key)
        while len(state.steps) > MAX_STEPS:
            state.steps.popitem(last=False)

    def _number_known(self, state: _Thread, step: _Step, number: int) -> None:
        if step.number is None:
            step.number = number
            step.node.name = f"superstep {number}"

    def _close(self, state: _Thread, step: _Step, leftover: NodeStatus) -> None:
        """End a super-step; its tasks still open end as ``leftover``."""
        for task in step.tasks:
            if task.node.status == "running":
                step.graph.end(task.node, leftover)
        if step.node.status == "running":
            step.graph.end(step.node, _step_status(step))
        step.closed = True
        steps = state.open.get(step.ns, [])
        if step in steps:
            steps.remove(step)
        if not steps:
            state.open.pop(step.ns, None)

    def _finish_attempt(self, state: _Thread, ns: str) -> None:
        """A run of ``ns`` is over: the super-steps it left open are final."""
        for step in list(state.open.get(ns, ())):
            self._close(state, step, "cancelled")  # what never reported was cut short

    def _reopen_root(self, state: _Thread, graph: TaskGraph, parent: str, step: Node) -> None:
        root = state.root
        if root is None or root.graph is not graph or root.node.id != parent:
            return
        state.last_root_step = step
        node = root.node
        if node.status != "running":
            node.status = "running"
            node.ended_at = None
            node.reason = node.error = node.category = None

    def _settle_root(self, state: _Thread) -> None:
        """End the thread's own task when none of its super-steps is open.

        While the handler watches the run, that is at the run's end.
        """
        root = state.root
        if root is None or root.node.status != "running" or state.watched:
            return
        if any(
            s.graph is root.graph and s.node.status == "running"
            for steps in state.open.values()
            for s in steps
        ):
            return
        last = state.last_root_step
        if last is not None and last.status in ("failed", "interrupted"):
            root.graph.end(root.node, last.status, reason=last.reason, category=last.category)
        else:
            root.graph.end(root.node, "succeeded")

    # tasks ----------------------------------------------------------------------------

    def _task(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str | None,
        number: int | None,
        task_id: str,
        name: str | None,
        *,
        starting: bool,
    ) -> _Task:
        """The record of a task's current execution; a new one when it is a new execution.

        A start seen by the handler after the recorded execution ended is a new execution
        (a ``RetryPolicy`` attempt, or a rerun); so is any event of a later attempt of the
        thread. Anything else is news about the execution already recorded.
        """
        state = self._thread(thread_id)
        generation = state.generation.get(ns, 0)
        record = state.tasks.get(task_id)
        if record is not None and record.generation == generation:
            if not (starting and record.node.status != "running"):
                if name is not None and record.node.attrs.get("unnamed"):
                    record.node.name = name
                    del record.node.attrs["unnamed"]
                return record
        step = self._step(thread_id, state, ns, checkpoint_id, number)
        attrs: dict[str, Any] = {"langgraph_task_id": task_id}
        depends: list[str] = []
        if record is not None and record.step.graph is step.graph:
            if record.node.status in ("failed", "interrupted", "cancelled"):
                depends = [record.node.id]  # a rerun of what did not finish
            else:
                attrs["replay_of"] = record.node.id  # time travel: it ran again
        if name is None:
            attrs["unnamed"] = True
        node = step.graph.start("step", name or "task", step.node.id, depends, **attrs)
        if not starting and step.node.started_at is not None:
            node.started_at = step.node.started_at  # the real start is not known
        task = _Task(task_id, step, node, generation)
        step.tasks.append(task)
        state.tasks[task_id] = task
        state.tasks.move_to_end(task_id)
        while len(state.tasks) > MAX_TASKS:
            state.tasks.popitem(last=False)
        return task

    def _outcome(self, task: _Task, status: NodeStatus, error: BaseException | None) -> None:
        """Record how a task ended (the latest word wins); its super-step follows."""
        step, node = task.step, task.node
        if node.status == status and (error is None or node.error is not None):
            return
        step.graph.end(node, status, error=error)
        verdict = _step_status(step)
        if verdict == "failed" and step.node.status != "failed":
            failed = [t.node for t in _latest(step) if t.node.status == "failed"][-1]
            step.graph.end(step.node, "failed", reason=failed.reason, category=failed.category)
        elif verdict == "interrupted" and step.node.status == "running":
            step.graph.end(step.node, "interrupted")
        elif verdict == "succeeded" and step.node.status == "failed":
            # a RetryPolicy attempt made good what the one before broke
            if step.closed:
                step.graph.end(step.node, "succeeded")
            else:
                step.node.status, step.node.ended_at = "running", None
                step.node.reason = step.node.category = None

    def _on_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> None:
        configurable = config.get("configurable", {})
        path = _parse_path(task_path)
        if path is None or "thread_id" not in configurable:
            return
        channels = {c for c, _ in writes}
        if channels <= _BOOKKEEPING:
            return
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "") or ""
        checkpoint_id = configurable.get("checkpoint_id")
        with self._lock:
            state = self._thread(thread_id)
            known = state.tasks.get(task_id)
            if (
                known is not None
                and known.generation == state.generation.get(ns, 0)
                and known.node.status == "succeeded"
                and known.step.checkpoint_id == checkpoint_id
                and not channels & _OUTCOMES
            ):
                return  # what the handler already recorded
            name = self._name_of(state, ns, checkpoint_id, path)
            task = self._task(thread_id, ns, checkpoint_id, None, task_id, name, starting=False)
            if path[0] == PUSH and path[1].isdigit():
                task.node.attrs["push_index"] = int(path[1])
            if task.step.checkpoint_id is None and checkpoint_id is not None:
                self._learn_checkpoint(state, task.step, checkpoint_id)
            if ERROR in channels:
                error = next(v for c, v in writes if c == ERROR)
                if isinstance(error, asyncio.CancelledError):
                    self._outcome(task, "cancelled", None)
                else:
                    exc = error if isinstance(error, BaseException) else RuntimeError(str(error))
                    self._outcome(task, "failed", exc)
            elif INTERRUPT in channels:
                task.node.attrs["interrupt"] = True
                self._outcome(task, "interrupted", None)
            else:
                self._outcome(task, "succeeded", None)
            step = task.step
            if not step.closed and (ns, step.checkpoint_id) in state.completed:
                self._close(state, step, "succeeded")  # its checkpoint's successor came first
            self._settle_root(state)

    def _name_of(
        self, state: _Thread, ns: str, checkpoint_id: str | None, path: tuple[str, str]
    ) -> str | None:
        kind, rest = path
        if kind == PULL:
            return rest
        if rest.isdigit() and checkpoint_id is not None:
            sends = state.sends.get((ns, checkpoint_id), [])
            if int(rest) < len(sends):
                return str(getattr(sends[int(rest)], "node", "send"))
        return None  # a functional ``@task`` call: named by the handler, if it saw it

    def _on_checkpoint(self, config: Any, checkpoint: Any, metadata: Any) -> None:
        configurable = config.get("configurable", {})
        if "thread_id" not in configurable:
            return
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "") or ""
        number = int(metadata.get("step", -1)) + 1
        key = (ns, str(checkpoint["id"]))
        with self._lock:
            state = self._thread(thread_id)
            _bounded_put(state.numbers, key, number)
            sends = checkpoint.get("channel_values", {}).get(TASKS)
            if sends:
                _bounded_put(state.sends, key, list(sends))
            known = state.steps.get(key)
            if known is not None:
                self._number_known(state, known, number)
                if sends:
                    _name_pushes(known, sends)
            parent = configurable.get("checkpoint_id")
            if metadata.get("source") not in ("loop", "input") or parent is None:
                return  # update_state, a fork, the first input: no super-step completed
            _bounded_put(state.completed, (ns, str(parent)), True)
            generation = state.generation.get(ns, 0)
            for step in list(state.open.get(ns, ())):
                if step.generation != generation:
                    continue
                if step.checkpoint_id is None and step.number == number - 1:
                    self._learn_checkpoint(state, step, str(parent))  # the one it completes
                if step.checkpoint_id == parent or (
                    step.number is not None and step.number < number
                ):
                    self._close(state, step, "succeeded")
            self._settle_root(state)

    # what the handler reports ---------------------------------------------------------

    def _task_started(
        self, thread_id: str, ns: str, number: int | None, task_id: str, name: str
    ) -> Frame:
        with self._lock:
            task = self._task(thread_id, ns, None, number, task_id, name, starting=True)
            return task.step.graph, task.node.id

    def _task_ended(
        self, thread_id: str, task_id: str, status: NodeStatus, error: BaseException | None
    ) -> None:
        with self._lock:
            state = self._threads.get(thread_id)
            task = state.tasks.get(task_id) if state is not None else None
            if task is not None and task.node.status == "running":
                self._outcome(task, status, error)


def _latest(step: _Step) -> list[_Task]:
    """The last execution of each task of a super-step (earlier ones were retried)."""
    return list({t.task_id: t for t in step.tasks}.values())


def _step_status(step: _Step) -> NodeStatus:
    statuses = {t.node.status for t in _latest(step)}
    if "failed" in statuses:
        return "failed"
    if "interrupted" in statuses:
        return "interrupted"
    return "succeeded"


def _name_pushes(step: _Step, sends: list[Any]) -> None:
    for task in step.tasks:
        index = task.node.attrs.get("push_index")
        if task.node.attrs.get("unnamed") and index is not None and index < len(sends):
            task.node.name = str(getattr(sends[index], "node", "send"))
            del task.node.attrs["unnamed"]


def _bounded_put(cache: collections.OrderedDict[Any, Any], key: Any, value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > MAX_STEPS:
        cache.popitem(last=False)


def _task_id_of(ns: str) -> str:
    """The task id at the end of a task's namespace.

    ``outer:ID|inner:ID``, or ``outer:ID|2`` for the second subgraph a task runs.
    """
    last = ns.rpartition("|")[2]
    if ":" in last:
        return last.rpartition(":")[2]
    segments = [p for p in ns.split("|") if ":" in p]
    return segments[-1].rpartition(":")[2] if segments else ""


def _parse_path(task_path: str) -> tuple[str, str] | None:
    """``(PULL, node name)`` or ``(PUSH, index or caller)`` from LangGraph's path string.

    ``None`` for what is not a task that ran: the input, ``update_state``'s writes, the
    writes ``durability="exit"`` files under synthetic ids.
    """
    parts = [p.strip() for p in task_path.split(",")]
    if len(parts) < 2:
        return None
    kind, first = parts[0].lstrip("~"), parts[1].lstrip("~")
    if kind == PULL:
        return None if first in _INTERNAL else (PULL, first)
    if kind == PUSH:
        return (PUSH, str(int(first)) if first.isdigit() else first)
    return None


# the callback handler ---------------------------------------------------------------

_RUNTIME = "__pregel_runtime"
"""A configurable key LangGraph sets on a run's config (not on ``get_state``'s)."""
_last_run: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "fxtr_langgraph_last_run", default=None
)
"""``[run id, thread id, running]`` of the last LangChain run started in this context (the
graph's run, when a loop's ``get_tuple`` reads it); ``running`` turns false when it ends."""


class _TaskWatcher(BaseCallbackHandler):
    """Sees LangGraph tasks start and end as the LangChain runs they are.

    One handler for the process; each run it sees is routed to the ``FluxCheckpointer`` whose
    ``get_tuple`` claimed the graph's run (runs of other graphs are ignored).
    """

    run_inline = True
    ignore_llm = True
    ignore_chat_model = True
    ignore_retriever = True
    ignore_agent = True
    ignore_retry = True
    ignore_custom_event = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._graphs: collections.OrderedDict[uuid.UUID, tuple[FluxCheckpointer, str, str]] = (
            collections.OrderedDict()
        )
        """Graph runs by run id: their checkpointer, thread id and namespace."""
        self._tasks: collections.OrderedDict[
            uuid.UUID, tuple[FluxCheckpointer, str, str, str, Any]
        ] = collections.OrderedDict()
        """Task runs by run id: checkpointer, thread id, namespace, task id, frame token."""
        self._running: dict[tuple[str, str], tuple[FluxCheckpointer, str]] = {}
        """Running tasks by (thread id, task id): checkpointer and namespace."""

    def claim(self, owner: FluxCheckpointer, thread_id: str, ns: str) -> bool:
        """A loop of ``owner`` starts: the graph run just started here is its run.

        Returns whether there was one (the handler sees this run, and will see it end).
        """
        last = _last_run.get()
        if last is None or last[1] != thread_id or not last[2]:
            return False
        with self._lock:
            if last[0] in self._graphs:
                return False  # an older run of this context, already claimed
            self._graphs[last[0]] = (owner, thread_id, ns)
            while len(self._graphs) > MAX_RUNS:
                self._graphs.popitem(last=False)
        return True

    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: uuid.UUID,
        parent_run_id: uuid.UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """A run starts: remember it; when it is a task of a graph we mirror, record it."""
        try:
            self._start(run_id, parent_run_id, metadata or {})
        except Exception:
            log.warning("fxtr could not mirror a LangGraph task start", exc_info=True)

    def _start(
        self, run_id: uuid.UUID, parent_run_id: uuid.UUID | None, metadata: dict[str, Any]
    ) -> None:
        thread = metadata.get("thread_id")
        if thread is None:
            return
        thread_id = thread if type(thread) is str else str(thread)
        _last_run.set([run_id, thread_id, True])
        task_ns = metadata.get("langgraph_checkpoint_ns")
        if type(task_ns) is not str or ":" not in task_ns:
            return
        task_id = _task_id_of(task_ns)
        if (thread_id, task_id) in self._running:
            return  # a run nested in a task that is running
        if metadata.get("langgraph_node") in _INTERNAL:
            return  # the input, or a conditional edge out of START: not a node of the user's
        with self._lock:
            if (thread_id, task_id) in self._running:
                return  # a run nested in a task that is running
            graph = self._graphs.get(parent_run_id) if parent_run_id is not None else None
            if graph is None:
                # Not a task of a graph run we mirror, or a functional-API ``@task`` call:
                # LangGraph hands every call made from one place the same callback manager
                # and rewrites its metadata for each, so the name and id a call's run reports
                # may be a sibling's. Calls are recorded from their writes; what they do
                # goes under the node of the task that called them.
                return
            owner, ns = graph[0], graph[2]
            self._running[(thread_id, task_id)] = (owner, ns)
        step = metadata.get("langgraph_step")
        name = str(metadata.get("langgraph_node", "task"))
        frame = owner._guard(
            owner._task_started,
            thread_id,
            ns,
            step if isinstance(step, int) else None,
            task_id,
            name,
        )
        token = current_frame.set(frame) if frame is not None else None
        with self._lock:
            self._tasks[run_id] = (owner, thread_id, ns, task_id, token)
            while len(self._tasks) > MAX_RUNS:  # runs whose end never came
                _, (_, old_thread, _, old_task, _) = self._tasks.popitem(last=False)
                self._running.pop((old_thread, old_task), None)

    def on_chain_end(self, outputs: Any, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        """A run ends: a task succeeded, or a graph's run is over."""
        self._end(run_id, "succeeded", None)

    def on_chain_error(self, error: BaseException, *, run_id: uuid.UUID, **kwargs: Any) -> None:
        """A run raised: a task failed, was interrupted or cancelled."""
        if isinstance(error, GraphInterrupt):
            self._end(run_id, "interrupted", None)
        elif isinstance(error, GraphBubbleUp):
            self._end(run_id, "succeeded", None)  # a Command for the parent graph
        elif isinstance(error, asyncio.CancelledError):
            self._end(run_id, "cancelled", None)
        else:
            self._end(run_id, "failed", error)

    def _end(self, run_id: uuid.UUID, status: NodeStatus, error: BaseException | None) -> None:
        last = _last_run.get()
        if last is not None and last[0] == run_id:
            last[2] = False
        if run_id not in self._tasks and run_id not in self._graphs:
            return  # a run nested in a task, or of a graph we do not mirror
        try:
            with self._lock:
                task = self._tasks.pop(run_id, None)
                graph = self._graphs.pop(run_id, None) if task is None else None
                if task is not None:
                    self._running.pop((task[1], task[3]), None)
            if task is not None:
                owner, thread_id, _, task_id, token = task
                if token is not None:
                    _reset(token)
                owner._guard(owner._task_ended, thread_id, task_id, status, error)
            elif graph is not None:
                owner, thread_id, ns = graph
                owner._guard(owner._on_run_end, thread_id, ns, error)
        except Exception:
            log.warning("fxtr could not mirror a LangGraph task end", exc_info=True)


def _reset(token: Any) -> None:
    try:
        current_frame.reset(token)
    except ValueError:  # ended in another context than it started: nothing to restore
        pass


_WATCHER = _TaskWatcher()
_watching: contextvars.ContextVar[_TaskWatcher | None] = contextvars.ContextVar(
    "fxtr_langgraph_watcher", default=_WATCHER
)
"""The handler LangChain adds to every callback manager it configures (in every thread and
task: the default), through ``langchain_core``'s configure hook; ``None`` turns it off in a
context."""
register_configure_hook(_watching, inheritable=True)
