"""The runner behind the authoring API: scheduling, resolution, cache, record and replay.

One ``Run`` is one pass over a job's root workflow: a live attempt, or the pure replay that
verifies it. Workflow bodies run as tasks and only schedule; each scheduled operation gets
its address at once (from its parent's address and its name) and becomes a task that waits
for its inputs, expands into one invocation per combination of mapped keys, and resolves
each invocation from the earlier attempt's record, the step cache, or by running the step.
Every outcome goes to ``Run.invocations`` and, batched per event-loop turn, to the store.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import itertools
import json
import logging
import time
import traceback
import types
import typing
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from fxtr.experiment import _hermetic as hermetic
from fxtr.experiment._array import Array, align_keys
from fxtr.experiment._encoding import (
    EncodingError,
    decode_text,
    encode_text,
    fingerprint_text,
)
from fxtr.experiment._entity import BoundID, Entity
from fxtr.experiment._executor import LOCAL
from fxtr.experiment._handle import ArrayHandle, make_handle
from fxtr.experiment._records import Invocation, WorkflowRun
from fxtr.experiment._signature import NO_DEFAULT, Param
from fxtr.experiment._types import (
    Dim,
    bound_target,
    check_value,
    format_dims,
    is_assignable,
    is_entity_type,
    type_name,
)
from fxtr.experiment.errors import DeterminismError, SignatureError, UpstreamFailedError
from fxtr.store import CacheEntry

if TYPE_CHECKING:
    from fxtr.experiment._context import StepContext, WorkflowContext
    from fxtr.experiment._definition import StepDefinition, WorkflowDefinition
    from fxtr.store import Batch, Store

log = logging.getLogger("fxtr")

Mode = Literal["live", "verify"]
SAMPLE = "sample"
"""The dimension ``samples=K`` adds: ``sample: int`` with keys ``0..K-1``."""
SAMPLE_DIM = Dim(SAMPLE, int)
_KEY_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:@+")


def format_key(key: str | int) -> str:
    """A map key as it appears in an address; quoted when it holds address syntax."""
    if isinstance(key, int) or (key and all(c in _KEY_SAFE for c in key)):
        return str(key)
    return json.dumps(key, ensure_ascii=False)


class Value:
    """What a node resolves to: an array whose missing cells name their cause.

    ``cause`` set means the whole array is missing (even its keys are unknown).
    """

    __slots__ = ("array", "cause", "missing")

    def __init__(
        self,
        array: Any,
        missing: dict[tuple[Any, ...], str] | None = None,
        cause: str | None = None,
    ) -> None:
        self.array = array
        """The ``Array`` a node resolves to; for one invocation's outcome, its bare value."""
        self.missing = missing or {}
        self.cause = cause


class Node:
    """A value in the job's graph that handles point at; resolves once."""

    __slots__ = ("dims", "future", "label", "producer", "run", "value_type")

    def __init__(
        self,
        run: Run,
        dims: tuple[Dim, ...],
        value_type: Any,
        label: str,
        producer: str,
        value: Value | None = None,
    ) -> None:
        self.run = run
        self.dims = dims
        self.value_type = value_type
        self.label = label
        """Stable name of the operation that makes it (used to compare replays)."""
        self.producer = producer
        """How error messages name its origin: "step 'qa.answer'", "input 'prompts'"."""
        self.future: asyncio.Future[Value] = asyncio.get_running_loop().create_future()
        if value is not None:
            self.future.set_result(value)

    async def observe(self) -> Array[Any]:
        value = await self.future
        if value.cause is not None:
            msg = f"{self.label!r} has no value: {value.cause}"
            raise UpstreamFailedError(msg)
        if value.missing:
            key, cause = next(iter(value.missing.items()))
            assert value.array is not None
            msg = (
                f"{self.label!r} has no value at {len(value.missing)} of {len(value.array)} "
                f"cell(s); first at {key!r}: {cause}. Catch UpstreamFailedError to go on "
                "without them."
            )
            raise UpstreamFailedError(msg)
        array: Array[Any] = value.array
        return array


class Binding:
    """How one input of an operation reaches the callee's parameter."""

    __slots__ = ("loads", "mapped", "node", "param", "rest")

    def __init__(self, param: Param, node: Node, map_over: Sequence[str], loads: bool) -> None:
        self.param = param
        self.node = node
        self.loads = loads
        names = [d.name for d in node.dims]
        self.mapped = [(map_over.index(n), i) for i, n in enumerate(names) if n in map_over]
        """(position in map_over, position in the node's dims) of each mapped dimension."""
        order = [d.name for d in param.dims]
        self.rest = [names.index(n) for n in order]
        """Positions in the node's dims of the dimensions the parameter keeps, in its order."""


class Operation:
    """One scheduled operation: where it is, what feeds it, and how it expands."""

    __slots__ = ("address", "bindings", "inherited", "map_over", "samples")

    def __init__(
        self,
        address: str,
        bindings: list[Binding],
        map_over: list[str],
        samples: int | None,
        inherited: int | None,
    ) -> None:
        self.address = address
        self.bindings = bindings
        self.map_over = map_over
        self.samples = samples
        """``samples=K`` of ``run_step``/``run_child_workflow``, or None."""
        self.inherited = inherited
        """The sample index of the workflow invocation that scheduled it, if sampled."""

    def expand(self, keylists: list[tuple[Any, ...]]) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The dimensions and key lists an operation's invocations range over (sample last)."""
        if self.samples is None:
            return self.map_over, keylists
        return [*self.map_over, SAMPLE], [*keylists, tuple(range(self.samples))]

    def sample_of(self, combo: tuple[Any, ...]) -> int | None:
        """The sample index an invocation at ``combo`` sees."""
        return combo[-1] if self.samples is not None else self.inherited  # type: ignore[no-any-return]


class Plan:
    """One invocation an operation expands into, before it is resolved."""

    __slots__ = ("address", "fingerprint", "fps", "kwargs", "sample", "skip")

    def __init__(
        self,
        address: str,
        kwargs: dict[str, Any],
        fps: dict[str, str],
        fingerprint: str | None,
        skip: str | None = None,
        sample: int | None = None,
    ) -> None:
        self.address = address
        self.kwargs = kwargs
        self.fps = fps
        """Fingerprint of each input."""
        self.fingerprint = fingerprint
        self.skip = skip
        """Why it cannot run (an input failed, or cannot be encoded)."""
        self.sample = sample


def _describe_node(node: Node) -> str:
    kind = "ScalarHandle" if not node.dims else "ArrayHandle"
    dims = f" with dims {format_dims(node.dims)}" if node.dims else ""
    return f"{kind}[{type_name(node.value_type)}]{dims} from {node.producer}"


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
        lease: float = 30.0,
        executor: Any = None,
        hermetic: bool = True,
        shared: bool = False,
    ) -> None:
        self.store = store
        self.hermetic = hermetic
        self.shared = shared
        """Other processes of the same run may run this attempt too (pytest-xdist workers)."""
        """Watch bodies for files and environment variables they touch."""
        self.job_id = job_id
        self.attempt = attempt
        self.mode = mode
        self.conflict = conflict
        self.prior = prior or {}
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
        self.sem = asyncio.Semaphore(concurrency)
        self.step_sems: dict[str, asyncio.Semaphore] = {}
        self.entities: dict[str, Entity] = {}
        self.held: set[str] = set()
        self.values_seen: set[str] = set()
        """Input fingerprints whose texts were queued for the store in this pass."""
        self._batch: Batch | None = None
        self._heartbeat: asyncio.Task[None] | None = None
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
            self.fatal = exc

    async def drive(self, root: Coroutine[Any, Any, Any]) -> Any:
        """Run the root body and everything it schedules; raise the first fatal error."""
        root_task = self.spawn(root)
        if self.mode == "live":
            self._heartbeat = asyncio.get_running_loop().create_task(self._renew_claims())
        try:
            while self.pending and self.fatal is None:
                await asyncio.wait(set(self.pending), return_when=asyncio.FIRST_EXCEPTION)
        finally:
            if self._heartbeat is not None:
                self._heartbeat.cancel()
            if self.fatal is not None or self.pending:
                for task in self.pending:
                    task.cancel()
                await asyncio.gather(*self.pending, return_exceptions=True)
            self.flush()
            if self.held:
                self.store.release(self.held)
                self.held.clear()
        if self.fatal is not None:
            raise self.fatal
        return root_task.result()

    async def _renew_claims(self) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            if self.held:
                self.store.renew(list(self.held), self.lease)

    # store writes ---------------------------------------------------------------------

    def _queue(self) -> Batch:
        if self._batch is None:
            from fxtr.store import Batch

            self._batch = Batch()
            asyncio.get_running_loop().call_soon(self.flush)
        return self._batch

    def flush(self) -> None:
        """Commit what completed since the last flush, in one transaction."""
        batch, self._batch = self._batch, None
        if batch:
            self.store.write(batch)

    def _finish(self, inv: Invocation) -> None:
        self.invocations[inv.address] = inv
        if self.mode == "live":
            self._queue().invocations.setdefault(self.job_id, []).append(inv.to_json())
        if self.on_invocation is not None:
            self.on_invocation(inv)

    # entities -------------------------------------------------------------------------

    async def store_entity(self, entity: Entity) -> BoundID[Any]:
        if not isinstance(entity, Entity):
            msg = f"store() takes an Entity, got {type(entity).__name__}. Define an Entity for it."
            raise TypeError(msg)
        text = encode_text(entity)
        ref: BoundID[Any] = BoundID(fingerprint_text(text), type(entity))
        if ref.id not in self.entities:
            self.entities[ref.id] = entity
            if self.mode == "live":
                self._queue().entities[ref.id] = text
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

    # scheduling -----------------------------------------------------------------------

    def const_node(self, value: Any, label_hint: str) -> Node:
        """A resolved node for a value given directly (an Array, or a plain value)."""
        if isinstance(value, Array):
            array = value
            dims = value.dim_specs
            value_type = value.value_type
        else:
            if isinstance(value, Entity):
                msg = (
                    f"Input {label_hint!r} is an Entity object; store it first "
                    "(ref = await context.store(obj)) and pass the reference."
                )
                raise SignatureError(msg)
            array = Array.scalar(value)
            dims = ()
            value_type = _static_type(value)
        try:
            fp = fingerprint_text(encode_text(array))
        except EncodingError as exc:
            msg = f"Input {label_hint!r} cannot be recorded: {exc}"
            raise SignatureError(msg) from None
        return Node(
            self, dims, value_type, f"value:{fp[:16]}", f"value {label_hint!r}", Value(array)
        )

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
        """Check inputs against a callee's parameters; all problems in one SignatureError.

        Returns:
            The bindings, the mapped dimensions with key types, and the concrete values of
            parameters that take plain values (workflows only).
        """
        problems: list[str] = []
        if not isinstance(inputs, Mapping):
            msg = f"{where}: inputs must be a dict of parameter name to handle or value."
            raise SignatureError(msg)
        if isinstance(map_over, str) or len(set(map_over)) != len(map_over):
            msg = f"{where}: map_over must be a list of distinct dimension names, got {map_over!r}."
            raise SignatureError(msg)
        for name in inputs:
            if name not in params:
                problems.append(
                    f"{callee} has no parameter {name!r} (its parameters: "
                    f"{', '.join(params) or 'none'}); remove it or rename it"
                )
        bindings: list[Binding] = []
        concrete: dict[str, Any] = {}
        mapped_types: dict[str, Dim] = {}
        for name, param in params.items():
            if name not in inputs and concrete_ok and param.default is not NO_DEFAULT:
                concrete[name] = param.default
                continue
            if name not in inputs:
                problems.append(f"{callee} needs input {name!r} ({param.describe()}); pass it")
                continue
            value = inputs[name]
            if param.kind == "value" and concrete_ok:
                if isinstance(value, ArrayHandle):
                    problems.append(
                        f"{callee} takes {param.describe()} as a plain value but got a handle; "
                        "annotate the parameter ScalarHandle[...] to pass a handle"
                    )
                elif not check_value(value, param.value_type):
                    problems.append(
                        f"{callee} expects {param.describe()} but got {type(value).__name__} "
                        f"{value!r:.60}"
                    )
                else:
                    concrete[name] = value
                continue
            if isinstance(value, ArrayHandle):
                node = value._node
                if node.run is not self:
                    problems.append(f"input {name!r} is a handle from another job or pass")
                    continue
            else:
                try:
                    node = self.const_node(value, name)
                except SignatureError as exc:
                    problems.append(str(exc))
                    continue
            for dim in node.dims:
                if dim.name in map_over:
                    seen = mapped_types.setdefault(dim.name, dim)
                    if seen.key_type is not dim.key_type:
                        problems.append(
                            f"dimension {dim.name!r} has {seen.key_type.__name__} keys in one "
                            f"input and {dim.key_type.__name__} keys in {name!r}"
                        )
            rest = [d for d in node.dims if d.name not in map_over]
            want = param.dims
            if sorted(rest) != sorted(want):
                extra = [d.name for d in rest if d not in want]
                lacking = [d.name for d in want if d not in rest]
                fix = []
                if extra:
                    fix.append(f"Map over {', '.join(map(repr, extra))}")
                if lacking:
                    fix.append(f"give it dimension(s) {', '.join(map(repr, lacking))}")
                problems.append(
                    f"{callee} expects {param.describe()!r} but got {_describe_node(node)}"
                    + (f" (mapped over {list(map_over)!r})" if map_over else "")
                    + ". "
                    + " or ".join(fix)
                    + " or change the annotation"
                )
                continue
            if not is_assignable(node.value_type, param.value_type):
                problems.append(
                    f"{callee} expects {param.describe()!r} but got {_describe_node(node)}. "
                    f"Pass {type_name(param.value_type)} values or change the annotation"
                )
                continue
            loads = bound_target(node.value_type) is not None and is_entity_type(param.value_type)
            bindings.append(Binding(param, node, map_over, loads))
        for name in map_over:
            if name not in mapped_types and not problems:
                have = sorted({d.name for b in bindings for d in b.node.dims})
                problems.append(
                    f"map_over names dimension {name!r} but no input has it (inputs have "
                    f"{have!r}); map over one of those"
                )
        if problems:
            msg = f"{where}: " + "; ".join(problems) + "."
            raise SignatureError(msg)
        return bindings, tuple(mapped_types[d] for d in map_over), concrete

    def record_op(self, workflow: WorkflowRun, desc: dict[str, Any]) -> None:
        """Append an operation to a workflow invocation's list; compare with the record."""
        ops = self.ops.setdefault(workflow.address, [])
        position = len(ops)
        ops.append(desc)
        expected = self.expected_ops.get(workflow.address)
        if expected is not None and position < len(expected):
            if expected[position] != desc:
                raise DeterminismError(
                    _determinism_message(workflow, position, desc, expected[position])
                )
        elif self.mode == "verify":
            msg = (
                f"Workflow {workflow.workflow!r} at {workflow.address!r} is not deterministic: "
                f"on replay, operation {position} is {_op_str(desc)} but the record ends after "
                f"{position} operation(s). Move randomness, time and I/O into a step."
            )
            raise DeterminismError(msg)

    def check_ops_complete(self, workflow: WorkflowRun) -> None:
        """In a verifying replay, the body must schedule every recorded operation."""
        if self.mode != "verify":
            return
        expected = self.expected_ops.get(workflow.address, [])
        done = len(self.ops.get(workflow.address, []))
        if done < len(expected):
            msg = (
                f"Workflow {workflow.workflow!r} at {workflow.address!r} is not deterministic: "
                f"on replay it scheduled {done} operation(s), but the record has "
                f"{len(expected)}; the first missing is {_op_str(expected[done])}. Move "
                "randomness, time and I/O into a step."
            )
            raise DeterminismError(msg)

    def schedule(
        self,
        ctx: WorkflowContext,
        name: str,
        callee: Any,
        inputs: Mapping[str, Any],
        map_over: Sequence[str],
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
        map_over = list(map_over)
        samples = _check_samples(where, samples, inputs)
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
        dims = _result_dims(where, mapped, own_dims)
        if samples is not None:
            dims = _result_dims(where, dims, (SAMPLE_DIM,))
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
        self.record_op(ctx._record, desc)
        node = Node(self, dims, value_type, address, f"{kind} {callee.name!r}")
        op = Operation(address, bindings, map_over, samples, ctx.sample)
        if kind == "step":
            self.spawn(self._step_op(op, callee, node))
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
        self.record_op(ctx._record, {"name": name, "kind": "source", "value": fp})
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
        self.check_ops_complete(record)
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
                f"Workflow {wf.name!r} returned {_describe_node(node)}, but its signature says "
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
        keylists = self._align(address, bindings, values, op.map_over) if op.map_over else []
        map_over, keylists = op.expand(keylists)
        combos = list(itertools.product(*keylists))
        slices = [self._slicer(b, v) for b, v in zip(bindings, values, strict=True)]

        async def one(combo: tuple[Any, ...]) -> Value:
            child_address = address + _key_suffix(map_over, combo)
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
                    f"{b.node.label}{_key_suffix(map_over, combo)}",
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
            _assemble(
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
        return _transposed(await child.future, dims)

    # step operations ------------------------------------------------------------------

    def _align(
        self, address: str, bindings: list[Binding], values: list[Value], map_over: list[str]
    ) -> list[tuple[Any, ...]]:
        spec = {
            b.param.name: (b.node.dims, v.array._keys)  # type: ignore[union-attr]
            for b, v in zip(bindings, values, strict=True)
        }
        try:
            return align_keys(spec, map_over)
        except ValueError as exc:
            msg = f"Operation {address!r}: {exc}"
            raise ValueError(msg) from None

    def _slicer(
        self, b: Binding, value: Value
    ) -> tuple[Callable[[tuple[Any, ...]], Any], Callable[[tuple[Any, ...]], Any]]:
        """Functions giving, per mapped combination, the parameter's value and its missing cells."""
        array = value.array
        assert array is not None
        cells = array._cells
        missing = value.missing
        nd = len(b.node.dims)
        if not b.rest:
            if not b.mapped:
                only = cells[()] if nd == 0 else None
                cause = missing.get(())
                return (lambda combo: only), (lambda combo: cause)
            if len(b.mapped) == nd and [j for _, j in b.mapped] == list(range(nd)):
                picks = [i for i, _ in b.mapped]
                if nd == 1:
                    # the common case (one mapped dimension): index by the bare key
                    (pick,) = picks
                    flat = {k[0]: v for k, v in cells.items()}
                    flat_missing = {k[0]: c for k, c in missing.items()}
                    return (
                        lambda combo: flat[combo[pick]],
                        (lambda combo: flat_missing.get(combo[pick]))
                        if flat_missing
                        else (lambda combo: None),
                    )

                def full_key(combo: tuple[Any, ...]) -> tuple[Any, ...]:
                    return tuple(combo[i] for i in picks)

                return (
                    lambda combo: cells[full_key(combo)],
                    (lambda combo: missing.get(full_key(combo))) if missing else (lambda c: None),
                )
        # general case: group cells by their mapped keys once
        keep_dims = tuple(b.node.dims[j] for j in b.rest)
        keep_keys = tuple(array._keys[j] for j in b.rest)
        groups: dict[tuple[Any, ...], dict[tuple[Any, ...], Any]] = {}
        group_missing: dict[tuple[Any, ...], dict[tuple[Any, ...], str]] = {}
        mapped_pos = [j for _, j in sorted(b.mapped)]
        for key, v in cells.items():
            mk = tuple(key[j] for j in mapped_pos)
            rk = tuple(key[j] for j in b.rest)
            groups.setdefault(mk, {})[rk] = v
            if key in missing:
                group_missing.setdefault(mk, {})[rk] = missing[key]
        order = [i for i, _ in sorted(b.mapped)]
        built: dict[tuple[Any, ...], Array[Any]] = {}

        def get(combo: tuple[Any, ...]) -> Any:
            mk = tuple(combo[i] for i in order)
            sub = built.get(mk)
            if sub is None:
                group = groups[mk]
                sub = built[mk] = Array(
                    keep_dims,
                    keep_keys,
                    {k: group[k] for k in itertools.product(*keep_keys)},
                    b.node.value_type,
                )
            return sub

        def missing_of(combo: tuple[Any, ...]) -> Any:
            return group_missing.get(tuple(combo[i] for i in order))

        return get, missing_of

    async def _step_op(self, op: Operation, step: StepDefinition[..., Any], node: Node) -> None:
        address, bindings = op.address, op.bindings
        values = [await b.node.future for b in bindings]
        result_param = step.signature.result
        assert result_param is not None
        cause = next((v.cause for v in values if v.cause), None)
        if cause is not None:
            node.future.set_result(Value(None, cause=cause))
            return
        keylists = self._align(address, bindings, values, op.map_over) if op.map_over else []
        map_over, keylists = op.expand(keylists)
        combos = list(itertools.product(*keylists))
        slices = [self._slicer(b, v) for b, v in zip(bindings, values, strict=True)]
        base_hash = hashlib.sha256(f"{step.name}\0{step.version!r}\0{step.source_hash}".encode())
        names = sorted(b.param.name for b in bindings)
        fp_memo: list[dict[Any, str]] = [{} for _ in bindings]
        verify = self.mode == "verify"
        values_seen = self.values_seen
        pairs = list(enumerate(zip(bindings, slices, strict=True)))
        plans: list[Plan] = []
        for combo, inv_address in zip(combos, _addresses(address, map_over, keylists), strict=True):
            kwargs: dict[str, Any] = {}
            fps: dict[str, str] = {}
            skip: str | None = None
            for i, (b, (get, missing_of)) in pairs:
                gone = missing_of(combo)
                if gone:
                    skip = gone if isinstance(gone, str) else next(iter(gone.values()))
                    break
                value = kwargs[b.param.name] = get(combo)
                if verify:
                    # replayed inputs come from the record and the already-compared operation
                    # descriptors, so they equal the recorded ones; no need to hash them again
                    continue
                memo_key = id(value) if type(value) is Array else _memo_key(value)
                fp = fp_memo[i].get(memo_key) if memo_key is not None else None
                if fp is None:
                    try:
                        text = encode_text(value)
                    except EncodingError as exc:
                        skip = f"input {b.param.name!r} cannot be encoded: {exc}"
                        break
                    fp = fingerprint_text(text)
                    if fp not in values_seen:
                        values_seen.add(fp)
                        self._queue().values[fp] = text
                    if memo_key is not None:
                        fp_memo[i][memo_key] = fp
                fps[b.param.name] = fp
            if skip is not None:
                plans.append(Plan(inv_address, {}, {}, None, skip))
                continue
            sample = op.sample_of(combo)
            if verify:
                fingerprint = None
            else:
                h = base_hash.copy()
                for name in names:
                    h.update(f"\0{name}={fps[name]}".encode())
                if sample is not None:  # a sample's index is an input (steps seed from it)
                    h.update(f"\0#sample={sample}".encode())
                fingerprint = h.hexdigest()
            plans.append(Plan(inv_address, kwargs, fps, fingerprint, sample=sample))
        outcomes = await self._resolve(step, plans, bindings)
        node.future.set_result(
            _assemble(
                address,
                node,
                combos,
                result_param.dims,
                outcomes,
                f"step {step.name!r}",
                sampled=op.samples is not None,
            )
        )

    async def _resolve(
        self,
        step: StepDefinition[..., Any],
        plans: list[Plan],
        bindings: list[Binding],
    ) -> list[Value]:
        """Resolve each planned invocation: replay, earlier attempt, cache, or run."""
        out: list[Value | None] = [None] * len(plans)
        todo: list[int] = []
        for i, plan in enumerate(plans):
            address, fps, fp = plan.address, plan.fps, plan.fingerprint
            if plan.skip is not None:
                inv = Invocation(
                    address, step.name, "skipped", error=plan.skip, attempt=self.attempt
                )
                self._finish(inv)
                out[i] = Value(None, cause=f"{inv.status} at {address!r}: {inv.error}")
                continue
            if self.mode == "verify":
                out[i] = self._replayed(step, address, fps, fp)
                continue
            prior = self.prior.get(address)
            if prior is not None and prior.status == "succeeded" and prior.fingerprint == fp:
                # an earlier attempt's result: its usage, logs and times stay with it
                usage = {
                    "calls": prior.calls,
                    "input_tokens": prior.input_tokens,
                    "output_tokens": prior.output_tokens,
                    "cost_usd": prior.cost_usd,
                    "by_model": prior.cost_by_model,
                }
                out[i] = self._served(
                    step,
                    address,
                    fps,
                    fp,
                    prior.result_text,
                    usage,
                    logs=prior.logs,
                    warnings=prior.warnings,
                    started_at=prior.started_at,
                    ended_at=prior.ended_at,
                )
                continue
            todo.append(i)
        if todo:
            entries = self.store.get_entries([plans[i].address for i in todo])
            run: list[tuple[int, str | None]] = []
            for i in todo:
                address, fps, fp = plans[i].address, plans[i].fps, plans[i].fingerprint
                entry = entries.get(address)
                if entry is None:
                    run.append((i, None))
                elif entry.fingerprint == fp:
                    out[i] = self._hit(step, address, fps, fp, entry)
                elif entry.version != _version_str(step.version) or self.conflict == "overwrite":
                    run.append((i, entry.to_text()))
                else:
                    conflict = _conflict(step, entry, fps)
                    inv = Invocation(
                        address,
                        step.name,
                        "needs_review",
                        fingerprint=fp,
                        input_fingerprints=fps,
                        conflict=conflict,
                        attempt=self.attempt,
                        error=f"cache conflict: {conflict['summary']}",
                    )
                    self._finish(inv)
                    out[i] = Value(
                        None, cause=f"needs review at {address!r}: {conflict['summary']}"
                    )
            if run:
                claims = self.store.claim(
                    [plans[i].address for i, _ in run], self.holder, self.lease
                )
                # another process may have finished an address between our read and our
                # claim: read the won ones again, so a result is never computed twice
                won = [plans[i].address for i, _ in run if claims[plans[i].address] is None]
                landed = self.store.get_entries(won) if won else {}
                failed = self._failed_elsewhere([a for a in won if a not in landed])
                tasks = []
                waiting: list[int] = []
                for i, replaced in run:
                    address = plans[i].address
                    entry = landed.get(address)
                    if entry is not None and entry.fingerprint == plans[i].fingerprint:
                        self._queue().released.append(address)
                        out[i] = self._hit(step, address, plans[i].fps, plans[i].fingerprint, entry)
                        continue
                    if address in failed:
                        self._queue().released.append(address)
                        out[i] = failed[address]
                        continue
                    waiting.append(i)
                    if claims[address] is None:
                        self.held.add(address)
                        tasks.append(self._invoke(step, plans[i], bindings, replaced))
                    else:
                        tasks.append(self._await_claim(step, plans[i], bindings, replaced))
                for i, value in zip(waiting, await asyncio.gather(*tasks), strict=True):
                    out[i] = value
        return typing.cast("list[Value]", out)

    def _replayed(
        self, step: StepDefinition[..., Any], address: str, fps: dict[str, str], fp: str | None
    ) -> Value:
        recorded = self.prior.get(address)
        if recorded is None:
            msg = (
                f"Replay scheduled step {step.name!r} at {address!r}, which the record of this "
                "attempt lacks: the workflow is not deterministic. Move randomness, time and "
                "I/O into a step."
            )
            raise DeterminismError(msg)
        if fp is not None and recorded.fingerprint is not None and recorded.fingerprint != fp:
            changed = sorted(
                k
                for k in set(fps) | set(recorded.input_fingerprints)
                if fps.get(k) != recorded.input_fingerprints.get(k)
            )
            msg = (
                f"Replay of step {step.name!r} at {address!r} got different inputs than the "
                f"record (changed: {', '.join(changed) or 'code'}): the workflow is not "
                "deterministic. Move randomness, time and I/O into a step."
            )
            raise DeterminismError(msg)
        self.invocations[address] = recorded
        if recorded.status == "succeeded":
            return Value(self._result_value(recorded.result_text))
        return Value(None, cause=f"{recorded.status} at {address!r}: {recorded.error}")

    def _failed_elsewhere(self, addresses: list[str]) -> dict[str, Value]:
        """Invocations of this attempt that another process of the same run already failed.

        Only processes that joined one attempt (``run_tag``) look: they take the failure
        instead of running the step again.
        """
        if not self.shared or not addresses:
            return {}
        prefix = f"{self.job_id}|{self.attempt}|"
        out: dict[str, Value] = {}
        for text in self.store.get_failures([prefix + a for a in addresses]).values():
            inv = Invocation.from_json(json.loads(text))
            self._finish(inv)
            out[inv.address] = Value(None, cause=f"failed at {inv.address!r}: {inv.error}")
        return out

    def _hit(
        self,
        step: StepDefinition[..., Any],
        address: str,
        fps: dict[str, str],
        fp: str | None,
        entry: CacheEntry,
    ) -> Value:
        return self._served(step, address, fps, fp, entry.result, entry.usage)

    def _served(
        self,
        step: StepDefinition[..., Any],
        address: str,
        fps: dict[str, str],
        fp: str | None,
        result_text: str | None,
        usage: dict[str, Any] | None,
        **recorded: Any,
    ) -> Value:
        """An invocation served without running (step cache or an earlier attempt)."""
        inv = Invocation(
            address,
            step.name,
            "succeeded",
            from_cache=True,
            fingerprint=fp,
            input_fingerprints=fps,
            result_text=result_text,
            attempt=self.attempt,
            **recorded,
        )
        if usage:
            inv.calls = usage.get("calls", 0)
            inv.input_tokens = usage.get("input_tokens", 0)
            inv.output_tokens = usage.get("output_tokens", 0)
            inv.cost_usd = usage.get("cost_usd")
            inv.cost_by_model = usage.get("by_model") or {}
        self._finish(inv)
        return Value(self._result_value(result_text))

    def _result_value(self, text: str | None) -> Any:
        assert text is not None
        return decode_text(text)

    async def _await_claim(
        self,
        step: StepDefinition[..., Any],
        plan: Plan,
        bindings: list[Binding],
        replaced: str | None,
    ) -> Value:
        """Another process runs this address: wait for its result, or take the claim over."""
        address, fps, fp = plan.address, plan.fps, plan.fingerprint
        while True:
            await asyncio.sleep(self.store.wait_hint())
            entry = self.store.get_entry(address)
            if entry is not None and entry.fingerprint == fp:
                return self._hit(step, address, fps, fp, entry)
            failed = self._failed_elsewhere([address]).get(address)
            if failed is not None:
                return failed
            if self.store.claim([address], self.holder, self.lease)[address] is None:
                # the holder may have finished between our read and our claim
                entry = self.store.get_entry(address)
                if entry is not None and entry.fingerprint == fp:
                    self._queue().released.append(address)
                    return self._hit(step, address, fps, fp, entry)
                self.held.add(address)
                if entry is not None and replaced is None:
                    replaced = entry.to_text()
                return await self._invoke(step, plan, bindings, replaced)

    async def _invoke(
        self,
        step: StepDefinition[..., Any],
        plan: Plan,
        bindings: list[Binding],
        replaced: str | None,
    ) -> Value:
        from fxtr.experiment._context import StepContext

        address, kwargs, fps, fp = plan.address, plan.kwargs, plan.fps, plan.fingerprint
        inv = Invocation(
            address,
            step.name,
            "failed",
            fingerprint=fp,
            input_fingerprints=fps,
            attempt=self.attempt,
        )
        step_sem = self._step_sem(step)
        try:
            async with self.sem:
                if step_sem is not None:
                    await step_sem.acquire()
                try:
                    inv.started_at = time.time()
                    ctx = StepContext(self, step, inv, plan.sample)
                    value = await self._call(step, ctx, kwargs, bindings)
                finally:
                    if step_sem is not None:
                        step_sem.release()
            text = self._encode_result(step, value)
        except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
            raise
        except Exception as exc:
            from fxtr.tracing import classify, failure_category

            inv.ended_at = time.time()
            remote = getattr(exc, "remote_traceback", None)  # raised on an executor's worker
            inv.error = str(exc) if remote else f"{type(exc).__name__}: {exc}"
            inv.traceback = remote or "".join(traceback.format_exception(exc))
            inv.reason = classify(exc)
            inv.category = failure_category(exc)
            # processes that joined this attempt and wait on our claim take this failure
            # instead of running the step again
            self._queue().failures[f"{self.job_id}|{self.attempt}|{address}"] = json.dumps(
                inv.to_json()
            )
            self._release(address)
            self._finish(inv)
            return Value(None, cause=f"step {step.name!r} failed at {address!r}: {inv.error}")
        inv.ended_at = time.time()
        inv.status = "succeeded"
        inv.result_text = text
        usage = None
        if inv.calls:
            usage = {
                "calls": inv.calls,
                "input_tokens": inv.input_tokens,
                "output_tokens": inv.output_tokens,
                "cost_usd": inv.cost_usd,
                "by_model": inv.cost_by_model,
            }
        meta = {
            "step": step.name,
            "source": step.source_hash,
            "inputs": fps,
            "job_id": self.job_id,
            "created_at": inv.ended_at,
        }
        entry = CacheEntry(fp or "", _version_str(step.version), text, usage, meta)
        batch = self._queue()
        batch.entries[address] = entry.to_text()
        if replaced is not None:
            batch.replaced[address] = replaced
        batch.released.append(address)
        self.held.discard(address)
        self._finish(inv)
        return Value(value if not isinstance(value, Entity) else BoundID.of(value))

    def _release(self, address: str) -> None:
        if address in self.held:
            self.held.discard(address)
            self._queue().released.append(address)

    def _step_sem(self, step: StepDefinition[..., Any]) -> asyncio.Semaphore | None:
        if step.concurrency is None:
            return None
        sem = self.step_sems.get(step.name)
        if sem is None:
            sem = self.step_sems[step.name] = asyncio.Semaphore(step.concurrency)
        return sem

    async def _call(
        self,
        step: StepDefinition[..., Any],
        ctx: StepContext,
        kwargs: dict[str, Any],
        bindings: list[Binding],
    ) -> Any:
        for b in bindings:
            if b.loads:
                value = kwargs[b.param.name]
                if isinstance(value, Array):
                    loaded = [await self.load_entity(v) for v in value.values()]
                    kwargs[b.param.name] = Array.from_cells(
                        value.dim_specs, value._keys, loaded, b.param.value_type
                    )
                else:
                    kwargs[b.param.name] = await self.load_entity(value)
        return await self.executor.run(step, ctx, kwargs)

    def _encode_result(self, step: StepDefinition[..., Any], value: Any) -> str:
        result = step.signature.result
        assert result is not None
        if result.kind == "array":
            if not isinstance(value, Array):
                msg = (
                    f"Step {step.name!r} returned {type(value).__name__}, but its signature "
                    f"says {result.describe()!r}. Return an Array."
                )
                raise TypeError(msg)
            if sorted(value.dim_specs) != sorted(result.dims):
                msg = (
                    f"Step {step.name!r} returned an Array with dims "
                    f"{format_dims(value.dim_specs)}, but its signature says "
                    f"{format_dims(result.dims)}."
                )
                raise TypeError(msg)
            value = value.transpose([d.name for d in result.dims])
            bad = next((v for v in value.values() if not check_value(v, result.value_type)), None)
            if bad is not None:
                msg = (
                    f"Step {step.name!r} returned an Array holding {type(bad).__name__} "
                    f"{bad!r:.60}, but its signature says {type_name(result.value_type)}."
                )
                raise TypeError(msg)
        elif isinstance(value, Entity) and is_entity_type(result.value_type):
            if not isinstance(value, result.value_type):
                msg = (
                    f"Step {step.name!r} returned {type(value).__qualname__}, but its "
                    f"signature says {type_name(result.value_type)}."
                )
                raise TypeError(msg)
            text = encode_text(value)
            ref = BoundID(fingerprint_text(text), type(value))
            self.entities[ref.id] = value
            self._queue().entities[ref.id] = text
            return encode_text(ref)
        elif not check_value(value, result.value_type):
            msg = (
                f"Step {step.name!r} returned {type(value).__name__} {value!r:.60}, but its "
                f"signature says '-> {type_name(result.value_type)}'. Return that type or "
                "change the annotation."
            )
            raise TypeError(msg)
        try:
            return encode_text(value)
        except EncodingError as exc:
            msg = f"Step {step.name!r} returned a result with no canonical encoding: {exc}"
            raise TypeError(msg) from None


def field_node(source: Node, path: tuple[str, ...]) -> Node:
    """A node projecting fields of each value of ``source`` (entities loaded)."""
    value_type = source.value_type
    for name in path:
        target = bound_target(value_type)
        if target is not None:
            value_type = target
        optional = False
        if typing.get_origin(value_type) in (
            typing.Union,
            types.UnionType,
        ):
            members = [a for a in typing.get_args(value_type) if a is not type(None)]
            optional = len(members) != len(typing.get_args(value_type))
            if len(members) == 1:
                value_type = members[0]
                target = bound_target(value_type)
                if target is not None:
                    value_type = target
        if is_entity_type(value_type):
            fields = value_type.field_types()
            if name not in fields:
                msg = (
                    f"field({name!r}): {type_name(value_type)} has no field {name!r}; its fields "
                    f"are {', '.join(fields)}."
                )
                raise SignatureError(msg)
            value_type = fields[name]
        elif value_type is Any or typing.get_origin(value_type) is dict or value_type is dict:
            args = typing.get_args(value_type)
            value_type = args[1] if len(args) == 2 else Any
        else:
            msg = f"field({name!r}): values of type {type_name(value_type)} have no fields."
            raise SignatureError(msg)
        if optional:
            value_type = value_type | None
    run = source.run
    label = f"{source.label}.{'.'.join(path)}"
    node = Node(run, source.dims, value_type, label, source.producer)

    async def project() -> None:
        value = await source.future
        if value.cause is not None or value.array is None:
            node.future.set_result(value)
            return
        out: dict[tuple[Any, ...], Any] = {}
        for key, v in value.array.items():
            if key in value.missing:
                out[key] = None
                continue
            for name in path:
                if v is None:
                    break
                if isinstance(v, BoundID):
                    v = await run.load_entity(v)
                v = v[name] if isinstance(v, dict) else getattr(v, name)
            out[key] = v
        array = Array(value.array.dim_specs, value.array._keys, out, node.value_type)
        node.future.set_result(Value(array, value.missing))

    run.spawn(project())
    return node


def _memo_key(value: Any) -> Any:
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return (t, value)
    if t is BoundID:
        return (t, value.id)
    return None


def _version_str(version: Any) -> str | None:
    return None if version is None else str(version)


def _addresses(
    address: str, map_over: Sequence[str], keylists: Sequence[tuple[Any, ...]]
) -> list[str]:
    """The address of every combination of keys, in ``itertools.product`` order."""
    if not map_over:
        return [address]
    parts = [
        [f"{d}={format_key(k)}" for k in keys] for d, keys in zip(map_over, keylists, strict=True)
    ]
    return [f"{address}[{','.join(p)}]" for p in itertools.product(*parts)]


def _key_suffix(map_over: Sequence[str], combo: tuple[Any, ...]) -> str:
    return (
        "[" + ",".join(f"{d}={format_key(k)}" for d, k in zip(map_over, combo, strict=True)) + "]"
    )


def _check_samples(where: str, samples: Any, inputs: Mapping[str, Any]) -> int | None:
    """``samples=`` as given to ``run_step``/``run_child_workflow``, checked."""
    if samples is None:
        return None
    if isinstance(samples, ArrayHandle):
        msg = (
            f"{where}: samples= takes an int, got a handle. Declare the workflow parameter as "
            "a plain value ('samples: int') and pass it."
        )
        raise SignatureError(msg)
    if isinstance(samples, bool) or not isinstance(samples, int):
        msg = f"{where}: samples= must be an int >= 1, got {type(samples).__name__} {samples!r}."
        raise SignatureError(msg)
    if samples < 1:
        msg = f"{where}: samples= must be at least 1, got {samples}."
        raise ValueError(msg)
    for name, value in inputs.items() if isinstance(inputs, Mapping) else ():
        if isinstance(value, ArrayHandle):
            dims, shown = value._node.dims, _describe_node(value._node)
        elif isinstance(value, Array):
            dims, shown = value.dim_specs, f"an Array with dims {format_dims(value.dim_specs)}"
        else:
            continue
        if any(d.name == SAMPLE for d in dims):
            msg = (
                f"{where}: input {name!r} already has a dimension 'sample' ({shown}), so "
                "samples= would sample samples. Map over 'sample' instead "
                "(map_over=[..., 'sample']) and leave out samples=."
            )
            raise SignatureError(msg)
    return samples


def _result_dims(where: str, mapped: tuple[Dim, ...], own: tuple[Dim, ...]) -> tuple[Dim, ...]:
    clash = {d.name for d in mapped} & {d.name for d in own}
    if clash:
        msg = (
            f"{where}: the result would have dimension(s) {sorted(clash)!r} twice (mapped over "
            "and returned by the callee). Rename one of them."
        )
        raise SignatureError(msg)
    return mapped + own


def _assemble(
    address: str,
    node: Node,
    combos: list[tuple[Any, ...]],
    own_dims: tuple[Dim, ...],
    outcomes: list[Value],
    label: str,
    sampled: bool = False,
) -> Value:
    """The operation's result: mapped keys (and ``sample``), then the callee's own dims.

    A sampled operation's ``sample`` dimension comes last in its node; invocations range
    over it with the mapped keys, so the cells are put together with it there and moved.
    """
    if own_dims and sampled:
        inner = (*node.dims[: -1 - len(own_dims)], SAMPLE_DIM, *own_dims)
        value = _assemble_cells(address, inner, node.value_type, combos, own_dims, outcomes, label)
        return _transposed(value, node.dims)
    return _assemble_cells(address, node.dims, node.value_type, combos, own_dims, outcomes, label)


def _transposed(value: Value, dims: tuple[Dim, ...]) -> Value:
    """``value`` with its array's dimensions in the order of ``dims`` (missing cells too)."""
    array = value.array
    names = [d.name for d in dims]
    if array is None or list(array.dims) == names:
        return value
    order = [list(array.dims).index(n) for n in names]
    missing = {tuple(k[i] for i in order): c for k, c in value.missing.items()}
    return Value(array.transpose(names), missing, value.cause)


def _assemble_cells(
    address: str,
    dims: tuple[Dim, ...],
    value_type: Any,
    combos: list[tuple[Any, ...]],
    own_dims: tuple[Dim, ...],
    outcomes: list[Value],
    label: str,
) -> Value:
    mapped_n = len(dims) - len(own_dims)
    if not own_dims:
        cells: dict[tuple[Any, ...], Any] = {}
        missing: dict[tuple[Any, ...], str] = {}
        for combo, v in zip(combos, outcomes, strict=True):
            if v.cause is not None:
                cells[combo] = None
                missing[combo] = v.cause
            else:
                cells[combo] = v.array
        keys = _mapped_keys(combos, mapped_n)
        return Value(Array(dims, keys, cells, value_type), missing)
    own_keys: tuple[tuple[Any, ...], ...] | None = None
    for v in outcomes:
        if v.cause is None and v.array is not None:
            arr = v.array
            if own_keys is None:
                own_keys = arr._keys
            elif arr._keys != own_keys:
                msg = (
                    f"Operation {address!r} ({label}) returned arrays with different keys in "
                    "different invocations; an operation's result must be dense. Return the "
                    "same keys from every invocation."
                )
                raise ValueError(msg)
    if own_keys is None:
        first = next((v.cause for v in outcomes if v.cause), "no invocation succeeded")
        return Value(None, cause=first)
    cells = {}
    missing = {}
    for combo, v in zip(combos, outcomes, strict=True):
        for own in itertools.product(*own_keys):
            key = combo + own
            if v.cause is not None or v.array is None:
                cells[key] = None
                missing[key] = v.cause or "missing"
            else:
                cells[key] = v.array._cells[own]
                if own in v.missing:
                    missing[key] = v.missing[own]
    keys = _mapped_keys(combos, mapped_n) + own_keys
    ordered = {k: cells[k] for k in itertools.product(*keys)}
    return Value(Array(dims, keys, ordered, value_type), missing)


def _mapped_keys(combos: list[tuple[Any, ...]], n: int) -> tuple[tuple[Any, ...], ...]:
    keys: list[dict[Any, None]] = [{} for _ in range(n)]
    for combo in combos:
        for i in range(n):
            keys[i][combo[i]] = None
    return tuple(tuple(k) for k in keys)


def _static_type(value: Any) -> Any:
    if isinstance(value, BoundID):
        return BoundID[value.entity_type]  # type: ignore[name-defined]
    if value is None:
        return type(None)
    if type(value) in (str, int, float, bool):
        return type(value)
    return Any


def _op_str(desc: dict[str, Any]) -> str:
    callee = f" ({desc['kind']} {desc['callee']})" if "callee" in desc else f" ({desc['kind']})"
    return f"{desc['name']!r}{callee}"


def _determinism_message(
    workflow: WorkflowRun, position: int, got: dict[str, Any], want: dict[str, Any]
) -> str:
    diffs = []
    for key in sorted(set(got) | set(want)):
        if got.get(key) != want.get(key):
            diffs.append(f"{key}: recorded {want.get(key)!r}, replayed {got.get(key)!r}")
    return (
        f"Workflow {workflow.workflow!r} is not deterministic: on replay, operation {position} "
        f"at {workflow.address!r} is {_op_str(got)} but the record has {_op_str(want)}. "
        f"Differences: {'; '.join(diffs)}. Move randomness, time and I/O into a step."
    )


def _conflict(
    step: StepDefinition[..., Any], entry: CacheEntry, fps: dict[str, str]
) -> dict[str, Any]:
    meta = entry.meta
    cached_inputs = meta.get("inputs", {})
    changed = sorted(k for k in set(fps) | set(cached_inputs) if fps.get(k) != cached_inputs.get(k))
    what = []
    if changed:
        what.append(f"input(s) {', '.join(changed)} changed")
    if meta.get("source") != step.source_hash:
        what.append(f"the source of step {step.name!r} changed (code drift)")
    if not what:
        what.append("the fingerprint changed")
    return {
        "inputs": changed,
        "source": meta.get("source") != step.source_hash,
        "cached_job": meta.get("job_id"),
        "summary": "; ".join(what)
        + ". Rerun with conflict='overwrite' (--fxtr-cache-conflict=overwrite) to replace it; "
        "the old result is kept in the history",
    }
