"""The bookkeeping of ``FluxCheckpointer``: LangGraph's events turned into graph nodes.

``_Mirror`` is the mixin ``fxtr.integrations.langgraph.FluxCheckpointer`` inherits (with
``InMemorySaver``): the checkpointer's ``get_tuple``/``put``/``put_writes`` call
``_run_started``, ``_on_checkpoint`` and ``_on_writes`` here, and the callback handler in
``fxtr.integrations._langgraph_watcher`` calls ``_task_started``, ``_task_ended`` and
``_on_run_end`` (each through ``_guard``). The records it keeps per thread (super-steps and
tasks, matched by task ids and checkpoint lineage) are in
``fxtr.integrations._langgraph_records``. It imports neither the handler nor the public
module, so the handler can call it without an import circle.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from langgraph.errors import GraphBubbleUp

from fxtr.integrations import _langgraph_records as limits
from fxtr.integrations._langgraph_records import (
    _BOOKKEEPING,
    _CANCELLED,
    _OUTCOMES,
    ERROR,
    INTERRUPT,
    PULL,
    PUSH,
    TASKS,
    Frame,
    _bounded_put,
    _latest,
    _name_pushes,
    _parse_path,
    _Step,
    _step_status,
    _Task,
    _task_id_of,
    _Thread,
)
from fxtr.tracing import Client, Node, NodeStatus, TaskGraph, TaskScope, current_frame

log = logging.getLogger("fxtr.langgraph")


class _Mirror:
    """Mirrors one checkpointer's LangGraph threads into ``client``'s task graphs.

    The class using it sets ``client``, ``_lock`` (a ``threading.RLock``) and ``_threads``.
    """

    client: Client
    _lock: threading.RLock
    _threads: dict[str, _Thread]

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

    def _run_started(self, thread_id: str, ns: str, watched: bool) -> None:
        """A run of ``ns`` starts (``watched``: the handler claimed it): a new attempt."""
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
        while len(state.steps) > limits.MAX_STEPS:
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
        if record is not None:
            if record.node.status in ("failed", "interrupted", "cancelled"):
                depends = [record.node.id]  # a rerun of what did not finish
            else:
                attrs["replay_of"] = record.node.id  # time travel: it ran again
            if record.step.graph is not step.graph:  # resumed inside another client.task()
                attrs["depends_on_task"] = record.step.graph.task_id
        if name is None:
            attrs["unnamed"] = True
        node = step.graph.start("step", name or "task", step.node.id, depends, **attrs)
        if not starting and step.node.started_at is not None:
            node.started_at = step.node.started_at  # the real start is not known
        task = _Task(task_id, step, node, generation)
        step.tasks.append(task)
        state.tasks[task_id] = task
        state.tasks.move_to_end(task_id)
        while len(state.tasks) > limits.MAX_TASKS:
            old_id, old = state.tasks.popitem(last=False)
            state.forgotten[old_id] = old.generation
            state.forgotten.move_to_end(old_id)
        while len(state.forgotten) > limits.MAX_TASKS * limits.FORGOTTEN_PER_TASK:
            state.forgotten.popitem(last=False)
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
            if known is None and state.forgotten.get(task_id) == state.generation.get(ns, 0):
                return  # a late write of an execution recorded, then dropped by the bound
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
                if isinstance(error, _CANCELLED):
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
