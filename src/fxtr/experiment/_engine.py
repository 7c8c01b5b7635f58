"""The runner: one pass over a job's root workflow, a live attempt or a verifying replay.

``Run`` holds a pass's state (the store, the record it replays against, what completed, the
claims it holds, the batch of writes) and drives the workflow bodies: each body runs as a
task and only schedules; each scheduled operation gets its address at once (from its
parent's address and its name) and becomes a task that waits for its inputs and expands
into invocations. The parts, each in its own module, and who calls whom:

- ``_binding``: inputs checked against the callee and planned into invocations (called
  here when an operation is scheduled and when its inputs are resolved);
- ``_stream``: a step operation planned and resolved as a stream of chunks, so its first
  invocations start before the last are planned (spawned here for each step operation);
- ``_resolution``: each invocation from the record, the cache, a claim, or a run, with the
  conflict policy in one place (called here per step operation);
- ``_invocation``: a step run through the executor (called by ``_resolution`` only);
- ``_replay``: operations and invocations compared with the record (called here and by
  ``_resolution``);
- ``_graph``: the nodes and values all of them pass around.

Every outcome goes to ``Run.invocations`` and, batched per event-loop turn, to the store.
The authoring contexts (``_context``) call ``schedule``, ``add_source``, ``spawn`` and the
entity methods; ``_jobs`` makes runs and drives them. Nothing here imports ``_jobs``.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from fxtr.experiment import _hermetic as hermetic
from fxtr.experiment._array import Array
from fxtr.experiment._binding import (
    Binding,
    Operation,
    align,
    bind,
    check_samples,
    key_suffix,
    result_dims,
    slicer,
)
from fxtr.experiment._encoding import (
    EncodingError,
    decode_text,
    encode_text,
    fingerprint_text,
)
from fxtr.experiment._entity import BoundID, Entity
from fxtr.experiment._executor import LOCAL
from fxtr.experiment._gc import job_collection
from fxtr.experiment._graph import (
    SAMPLE,
    SAMPLE_DIM,
    Node,
    Value,
    assemble,
    describe_node,
    field_node,
    format_key,
    transposed,
)
from fxtr.experiment._handle import ArrayHandle, make_handle
from fxtr.experiment._heartbeat import LEASE, Heartbeat
from fxtr.experiment._records import Invocation, WorkflowRun
from fxtr.experiment._replay import check_ops_complete, record_op
from fxtr.experiment._signature import Param
from fxtr.experiment._stream import run_step_op
from fxtr.experiment._types import Dim, is_assignable, is_entity_type
from fxtr.experiment._watchdog import LoopWatchdog
from fxtr.experiment.errors import SignatureError, UpstreamFailedError
from fxtr.store._base import DEFAULT_KEEP, is_outage

if TYPE_CHECKING:
    from fxtr.experiment._context import WorkflowContext
    from fxtr.experiment._definition import WorkflowDefinition
    from fxtr.store import Batch, Store

__all__ = [
    "LEASE",
    "SAMPLE",
    "SAMPLE_DIM",
    "Node",
    "Run",
    "Value",
    "field_node",
    "format_key",
]

log = logging.getLogger("fxtr")

Mode = Literal["live", "verify"]
FLUSH_EVERY = 512
"""Invocation records a batch holds at most before it is committed."""
VALUES_SEEN_MAX = 16_384
"""Input fingerprints a pass remembers as queued before it starts afresh (a value queued
again is written again, the same text under the same key: only memory is saved)."""


class Run:
    """One pass over a job: a live attempt or a verifying replay."""

    def __init__(
        self,
        *,
        store: Store,
        job_id: str,
        attempt: int,
        mode: Mode = "live",
        conflict: str = "review",
        concurrency: int = 32,
        prior: Mapping[str, Invocation] | None = None,
        expected_ops: Mapping[str, list[dict[str, Any]]] | None = None,
        holder: str = "",
        lease: float = LEASE,
        executor: Any = None,
        hermetic: bool = True,
        shared: bool = False,
        keep: int = DEFAULT_KEEP,
    ) -> None:
        self.store = store
        self.keep = keep
        """Entries each address keeps at most (``cache_keep``)."""
        self.hermetic = hermetic
        """Watch bodies for files and environment variables they touch."""
        self.shared = shared
        """Other processes of the same run may run this attempt too (pytest-xdist workers)."""
        self.job_id = job_id
        self.attempt = attempt
        self.mode = mode
        self.conflict = conflict
        self.prior = prior if prior is not None else {}
        self.expected_ops = expected_ops or {}
        self.holder = holder
        self.lease = lease
        self.executor = executor or LOCAL
        """Where step bodies run (the local event loop unless told otherwise)."""
        self.invocations: dict[str, Invocation] = {}
        self.workflows: dict[str, WorkflowRun] = {}
        self.ops: dict[str, list[dict[str, Any]]] = {}
        self.pending: set[asyncio.Task[Any]] = set()
        self.fatal: BaseException | None = None
        self.concurrency = concurrency
        self.sem = asyncio.Semaphore(concurrency)
        self.step_sems: dict[str, asyncio.Semaphore] = {}
        self.entities: dict[str, Entity] = {}
        self.held: set[str] = set()
        self.running: dict[asyncio.Task[Any], Invocation] = {}
        """The invocation each task is running a step body for (the loop watchdog names it)."""
        self.damaged: dict[str, None] = {}
        """Addresses whose stored entry was damaged (checksum, unreadable): recomputed."""
        self.values_seen: set[str] = set()
        """Input fingerprints whose texts were queued for the store in this pass."""
        self.why_memo: dict[Any, list[str]] = {}
        """What differs between two values of an input, computed once a pass (``_why``)."""
        self._batch: Batch | None = None
        self._heartbeat: Heartbeat | None = None
        self.outage = False
        """The store stopped answering: nothing more is written in this pass."""
        self.on_invocation: Callable[[Invocation], None] | None = None
        """Called as each invocation ends (progress reporting, the execution graph)."""

    # tasks ----------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        context = contextvars.copy_context()
        context.run(hermetic.watching.set, None)  # engine work is not the body's
        task = asyncio.get_running_loop().create_task(coro, context=context)
        self.pending.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self.pending.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None and self.fatal is None:
            if isinstance(exc, Exception) and is_outage(exc):  # a read of the store failed
                self._stop_for_outage(exc)
            else:
                self.fatal = exc

    async def drive(self, root: Coroutine[Any, Any, Any]) -> Any:
        """Run the root body and everything it schedules; raise the first fatal error."""
        with job_collection():  # fewer collections while the pass runs (``_gc``)
            return await self._drive(root)

    async def _drive(self, root: Coroutine[Any, Any, Any]) -> Any:
        root_task = self.spawn(root)
        watchdog = None
        if self.mode == "live":
            self._heartbeat = Heartbeat(self)
            self._heartbeat.start()
            watchdog = LoopWatchdog(asyncio.get_running_loop(), self.running)
            watchdog.start()
        try:
            while self.pending and self.fatal is None:
                await asyncio.wait(set(self.pending), return_when=asyncio.FIRST_EXCEPTION)
        finally:
            if watchdog is not None:
                watchdog.stop()
            if self._heartbeat is not None:
                self._heartbeat.stop()
            if self.fatal is not None or self.pending:
                for task in self.pending:
                    task.cancel()
                await asyncio.gather(*self.pending, return_exceptions=True)
            self.flush()
            if self.held and not self.outage:
                self.store.release(self.held)
                self.held.clear()
        if self.fatal is not None:
            raise self.fatal
        return root_task.result()

    # store writes ---------------------------------------------------------------------

    def queue(self) -> Batch:
        """The batch of writes the next flush commits (one per event-loop turn)."""
        if self._batch is None:
            from fxtr.store import Batch

            self._batch = Batch(keep=self.keep)
            asyncio.get_running_loop().call_soon(self.flush)
        return self._batch

    def flush(self) -> None:
        """Commit what completed since the last flush, in one transaction.

        A batch the store refuses (a value it cannot hold, a full disk) is written again in
        parts: a result that cannot be stored fails only its invocation; the rest is kept.
        """
        from fxtr.store._base import redact_batch

        batch, self._batch = self._batch, None
        if batch and not self.outage:
            batch = redact_batch(batch)  # the one place texts leave for the store
            try:
                self.store.write(batch)
            except Exception as exc:
                if is_outage(exc):
                    self._stop_for_outage(exc)
                else:
                    self._write_apart(batch, exc)

    def _stop_for_outage(self, error: Exception) -> None:
        """The store is gone: stop scheduling, say so once, leave the job resumable."""
        from fxtr.store._base import StoreOutage, outage_message

        where = getattr(self.store, "path", self.store)
        self.outage = True
        if self.fatal is None:
            self.fatal = StoreOutage(outage_message(where, error, self.job_id, self.attempt))

    def _write_apart(self, batch: Batch, error: Exception) -> None:
        from fxtr.store import Batch
        from fxtr.store._base import redact_record

        log.warning("a batch could not be stored (%s); writing it in parts", error)
        lost: dict[str, str] = {}
        if batch.blobs:  # parts first: an entry written apart must not name a part not stored
            try:
                self.store.write(Batch(blobs=batch.blobs))
            except Exception as exc:
                log.warning("parts could not be stored (%s); the results naming them miss", exc)
        for address, text in batch.entries.items():
            one = Batch(entries={address: text}, keep=batch.keep)
            try:
                self.store.write(one)
            except Exception as exc:
                lost[address] = f"{type(exc).__name__}: {exc}"
        for address, problem in lost.items():
            inv = self.invocations.get(address)
            if inv is not None:
                inv.status, inv.result_text, inv.reason = "failed", None, "tool_error"
                inv.error = (
                    f"the result of step {inv.step!r} at {address!r} could not be stored "
                    f"({problem}); return a value the store can hold (valid UTF-8 text)"
                )
        records = {
            job: [
                redact_record(self.invocations[r["address"]].to_json())
                if r["address"] in lost
                else r
                for r in rows
            ]
            for job, rows in batch.invocations.items()
        }
        parts = [Batch(invocations={job: [r]}) for job, rows in records.items() for r in rows]
        parts += [Batch(entities={k: v}) for k, v in batch.entities.items()]
        parts += [Batch(values={k: v}) for k, v in batch.values.items()]
        parts += [Batch(failures={k: v}) for k, v in batch.failures.items()]
        parts += [Batch(current={a: k}, keep=batch.keep) for a, k in batch.current.items()]
        for part in parts:
            try:
                self.store.write(part)
            except Exception as exc:
                log.warning("a record could not be stored and is lost: %s", exc)
        self.store.release(batch.released)

    def see_value(self, fingerprint: str) -> None:
        """Note an input text as queued for the store (bounded: see ``VALUES_SEEN_MAX``)."""
        if len(self.values_seen) >= VALUES_SEEN_MAX:
            self.values_seen.clear()
        self.values_seen.add(fingerprint)

    def finish(self, inv: Invocation) -> None:
        """Record an invocation's outcome (and queue it for the store in a live pass)."""
        inv.compact()
        self.invocations[inv.address] = inv
        if self.mode == "live":
            records = self.queue().invocations.setdefault(self.job_id, [])
            records.append(inv.to_json())
            if len(records) >= FLUSH_EVERY:
                # steps that never suspend complete many invocations in one event-loop
                # turn; commit them in bounded batches rather than all at its end
                self.flush()
        if self.on_invocation is not None:
            self.on_invocation(inv)

    # entities -------------------------------------------------------------------------

    async def store_entity(self, entity: Entity, text: str | None = None) -> BoundID[Any]:
        """Store an entity; ``text``, when given, is its canonical text (``encode_text``)."""
        if not isinstance(entity, Entity):
            msg = f"store() takes an Entity, got {type(entity).__name__}. Define an Entity for it."
            raise TypeError(msg)
        if text is None:
            text = encode_text(entity)
        ref: BoundID[Any] = BoundID(fingerprint_text(text), type(entity))
        if ref.id not in self.entities:
            self.entities[ref.id] = entity
            if self.mode == "live":
                self.queue().entities[ref.id] = text
        return ref

    async def load_entity(self, ref: BoundID[Any]) -> Any:
        if not isinstance(ref, BoundID):
            msg = f"load() takes a BoundID, got {type(ref).__name__}."
            raise TypeError(msg)
        entity = self.entities.get(ref.id)
        if entity is None:
            text = self.store.get_entity(ref.id)
            if text is None:
                msg = f"Entity {ref!r} is not in the store at {self.store.path}."
                raise KeyError(msg)
            entity = decode_text(text)
            self.entities[ref.id] = entity
        return entity

    _queue = queue  # the name integrations used before the executor seam
    _finish = finish

    # scheduling -----------------------------------------------------------------------

    def bind(
        self,
        where: str,
        callee: str,
        params: Mapping[str, Param],
        inputs: Mapping[str, Any],
        map_over: Sequence[str],
        *,
        concrete_ok: bool,
    ) -> tuple[list[Binding], tuple[Dim, ...], dict[str, Any]]:
        """``_binding.bind`` for this run (see there)."""
        return bind(self, where, callee, params, inputs, map_over, concrete_ok=concrete_ok)

    def schedule(
        self,
        ctx: WorkflowContext,
        name: str,
        callee: Any,
        inputs: Mapping[str, Any],
        map_over: str | Sequence[str],
        kind: Literal["step", "workflow"],
        samples: int | None = None,
    ) -> ArrayHandle[Any] | None:
        """Check an operation against its callee, record it, and start it; its handle."""
        from fxtr.experiment._definition import StepDefinition, WorkflowDefinition

        address = ctx._child_address(name)
        where = f"In workflow {ctx.workflow_name!r}, operation {name!r}"
        if kind == "step" and not isinstance(callee, StepDefinition):
            msg = f"{where}: {callee!r} is not a @step; use run_child_workflow for workflows."
            raise SignatureError(msg)
        if kind == "workflow" and not isinstance(callee, WorkflowDefinition):
            msg = f"{where}: {callee!r} is not a @workflow; use run_step for steps."
            raise SignatureError(msg)
        map_over = [map_over] if isinstance(map_over, str) else list(map_over)  # "model": one dim
        samples = check_samples(where, samples, inputs)
        bindings, mapped, concrete = self.bind(
            where,
            f"{kind.capitalize()} {callee.name!r}",
            callee.signature.params,
            inputs,
            map_over,
            concrete_ok=kind == "workflow",
        )
        result = callee.signature.result
        own_dims = result.dims if result else ()
        dims = result_dims(where, mapped, own_dims)
        if samples is not None:
            dims = result_dims(where, dims, (SAMPLE_DIM,))
        value_type = result.value_type if result else Any
        if kind == "step" and is_entity_type(value_type):
            value_type = BoundID[value_type]  # type: ignore[valid-type]
        labels = {b.param.name: b.node.label for b in bindings}
        labels.update(
            {k: "value:" + fingerprint_text(encode_text(v))[:16] for k, v in concrete.items()}
        )
        desc: dict[str, Any] = {
            "name": name,
            "kind": kind,
            "callee": callee.name,
            "inputs": labels,
            "map_over": map_over,
        }
        if samples is not None:
            desc["samples"] = samples
        record_op(self, ctx._record, desc)
        node = Node(self, dims, value_type, address, f"{kind} {callee.name!r}")
        op = Operation(address, bindings, map_over, samples, ctx.sample)
        if kind == "step":
            self.spawn(run_step_op(self, op, callee, node))
            return make_handle(node)
        self.spawn(self._workflow_op(op, callee, concrete, node))
        return make_handle(node) if result is not None else None

    def add_source(self, ctx: WorkflowContext, name: str, array: Array[Any]) -> ArrayHandle[Any]:
        address = ctx._child_address(name)
        if not isinstance(array, Array):
            msg = (
                f"In workflow {ctx.workflow_name!r}, add_source_array({name!r}) needs an Array, "
                f"got {type(array).__name__}. Wrap a value with Array.scalar(value, T)."
            )
            raise TypeError(msg)
        try:
            fp = fingerprint_text(encode_text(array))
        except EncodingError as exc:
            msg = f"In workflow {ctx.workflow_name!r}, source array {name!r}: {exc}"
            raise TypeError(msg) from None
        record_op(self, ctx._record, {"name": name, "kind": "source", "value": fp})
        node = Node(
            self, array.dim_specs, array.value_type, address, f"source {name!r}", Value(array)
        )
        return make_handle(node)

    # workflow bodies ------------------------------------------------------------------

    async def run_body(
        self,
        wf: WorkflowDefinition[..., Any],
        address: str,
        kwargs: dict[str, Any],
        sample: int | None = None,
    ) -> Node | None:
        """Run a workflow body; its returned handle's node, or None when it was skipped."""
        from fxtr.experiment._context import WorkflowContext

        record = WorkflowRun(address, wf.name, started_at=time.time())
        self.workflows[address] = record
        ctx = WorkflowContext(self, record, sample)
        token = hermetic.watching.set(record.warnings if self.hermetic else None)
        try:
            result = await wf.fn(ctx, **kwargs)
        except UpstreamFailedError as exc:
            record.status = "skipped"
            record.error = f"UpstreamFailedError: {exc}"
            record.ended_at = time.time()
            return None
        except BaseException as exc:
            record.status = "failed"
            record.error = f"{type(exc).__name__}: {exc}"
            record.ended_at = time.time()
            raise
        finally:
            hermetic.watching.reset(token)
        record.ended_at = time.time()
        check_ops_complete(self, record)
        expected = wf.signature.result
        if expected is None:
            record.status = "succeeded"
            return None
        if not isinstance(result, ArrayHandle) or result._node.run is not self:
            msg = (
                f"Workflow {wf.name!r} returned {type(result).__name__}, but its signature "
                f"says {expected.describe()!r}. Return the handle of a scheduled operation."
            )
            raise SignatureError(msg)
        node = result._node
        if sorted(node.dims) != sorted(expected.dims) or not is_assignable(
            node.value_type, expected.value_type
        ):
            msg = (
                f"Workflow {wf.name!r} returned {describe_node(node)}, but its signature says "
                f"{expected.describe()!r}. Fix the annotation or what it returns."
            )
            raise SignatureError(msg)
        record.status = "succeeded"
        return node

    async def _workflow_op(
        self,
        op: Operation,
        wf: WorkflowDefinition[..., Any],
        concrete: dict[str, Any],
        node: Node,
    ) -> None:
        address, bindings = op.address, op.bindings
        result = wf.signature.result
        result_dims = result.dims if result else ()
        if not op.map_over and op.samples is None:
            kwargs = {b.param.name: make_handle(b.node) for b in bindings}
            child = await self.run_body(wf, address, {**kwargs, **concrete}, op.inherited)
            node.future.set_result(await self._forward(child, address, wf.name, node.dims))
            return
        values = [await b.node.future for b in bindings]
        cause = next((v.cause for v in values if v.cause), None)
        if cause is not None:
            node.future.set_result(Value(None, cause=cause))
            return
        keylists = align(address, bindings, values, op.map_over) if op.map_over else []
        map_over, keylists = op.expand(keylists)
        combos = list(itertools.product(*keylists))
        slices = [slicer(b, v) for b, v in zip(bindings, values, strict=True)]

        async def one(combo: tuple[Any, ...]) -> Value:
            child_address = address + key_suffix(map_over, combo)
            kwargs: dict[str, Any] = dict(concrete)
            for b, (get, missing_of) in zip(bindings, slices, strict=True):
                sub, missing = get(combo), missing_of(combo)
                array = sub if isinstance(sub, Array) else Array.scalar(sub, b.node.value_type)
                missing_cells = (
                    {k: c for k, c in missing.items()}
                    if isinstance(missing, dict)
                    else ({(): missing} if missing else {})
                )
                child = Node(
                    self,
                    b.param.dims,
                    b.node.value_type,
                    f"{b.node.label}{key_suffix(map_over, combo)}",
                    b.node.producer,
                    Value(array, missing_cells),
                )
                kwargs[b.param.name] = make_handle(child)
            body_node = await self.run_body(wf, child_address, kwargs, op.sample_of(combo))
            value = await self._forward(body_node, child_address, wf.name, tuple(result_dims))
            if result_dims or value.cause is not None or value.array is None:
                return value
            if () in value.missing:
                return Value(None, cause=value.missing[()])
            return Value(value.array.item())

        outcomes = await asyncio.gather(*(one(c) for c in combos))
        node.future.set_result(
            assemble(
                address,
                node,
                combos,
                result_dims,
                outcomes,
                f"workflow {wf.name!r}",
                sampled=op.samples is not None,
            )
        )

    async def _forward(
        self, child: Node | None, address: str, wf_name: str, dims: tuple[Dim, ...]
    ) -> Value:
        if child is None:
            record = self.workflows.get(address)
            why = record.error if record else "it did not return"
            return Value(None, cause=f"workflow {wf_name!r} at {address!r} was skipped ({why})")
        return transposed(await child.future, dims)
