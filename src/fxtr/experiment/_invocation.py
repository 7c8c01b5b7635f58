"""Invocation: one step run through the executor, its result checked, encoded and queued.

``invoke`` is called by resolution (``_resolution``) once the address is claimed: it takes
the run's and the step's semaphores, builds the ``StepContext``, loads entity inputs, calls
the executor (which honours the step's timeout), validates the result against the step's
signature, encodes it, and queues the cache entry, the record and the claim's release in
the run's batch. A step that raises fails only its invocation.
"""

from __future__ import annotations

import asyncio
import json
import time
import traceback
from typing import TYPE_CHECKING, Any

from fxtr.experiment._array import Array
from fxtr.experiment._encoding import EncodingError, decode_text, encode_text, fingerprint_text
from fxtr.experiment._entity import BoundID, Entity
from fxtr.experiment._graph import Value
from fxtr.experiment._records import Invocation
from fxtr.experiment._types import check_value, format_dims, is_entity_type, type_name
from fxtr.experiment._why import explain
from fxtr.models._classify import classify, failure_category
from fxtr.store import CacheEntry

if TYPE_CHECKING:
    from fxtr.experiment._binding import Binding, Plan
    from fxtr.experiment._context import StepContext
    from fxtr.experiment._definition import StepDefinition
    from fxtr.experiment._engine import Run


async def invoke(
    run: Run,
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
        attempt=run.attempt,
    )
    if replaced is not None:  # it runs at a known address: say what changed
        found = CacheEntry.from_text(replaced)
        inv.found = found.key
        inv.changed = explain(run, step, fps, found)
    elif address in run.damaged:
        inv.changed = ["the entry was damaged (recomputed)"]
    step_sem = step_semaphore(run, step)
    try:
        async with run.sem:
            if step_sem is not None:
                await step_sem.acquire()
            task = asyncio.current_task()
            try:
                inv.started_at = time.time()
                ctx = StepContext(run, step, inv, plan.sample)
                if task is not None:
                    run.running[task] = inv  # for the loop watchdog
                value = await call(run, step, ctx, kwargs, bindings)
            finally:
                if task is not None:
                    run.running.pop(task, None)
                if step_sem is not None:
                    step_sem.release()
        text = encode_result(run, step, value)
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the job is being cancelled: not this invocation's failure
        return failed(run, step, inv, exc)  # the step raised CancelledError itself
    except (KeyboardInterrupt, SystemExit) as exc:
        # raised inside the step's body (a Ctrl-C reaches asyncio as a cancellation)
        return failed(run, step, inv, exc)
    except Exception as exc:
        return failed(run, step, inv, exc)
    inv.ended_at = time.time()
    inv.status = "succeeded"
    inv.result_text = text
    usage = inv.usage() if inv.calls else None
    meta = {
        "step": step.name,
        "source": step.source_hash,
        "inputs": fps,
        "job_id": run.job_id,
        "created_at": inv.ended_at,
    }
    code = code_reached(inv.model_calls) if inv.calls else None
    batch = run.queue()
    if ctx._blobs:  # the parts its result names, in the same batch as the entry
        meta["parts"] = sorted(ctx._blobs)
        batch.blobs.update(ctx._blobs)
    entry = CacheEntry(fp or "", version_str(step.version), text, usage, meta, code=code)
    batch.entries[address] = entry.to_text()  # the store keeps the entry it displaces
    batch.released.append(address)
    run.held.discard(address)
    run.finish(inv)
    if not isinstance(value, Entity):
        return Value(value)
    if text.startswith('{"$ref":'):  # stored by encode_result: its reference, not encoded again
        return Value(decode_text(text))
    return Value(BoundID.of(value))


def code_reached(calls: list[dict[str, Any]]) -> dict[str, str] | None:
    """The code a step's model calls reached, by model (a mock's reply function's digest)."""
    code = {f"{c.get('provider')}/{c['model']}": c["code"] for c in calls if c.get("code")}
    return code or None


def failed(run: Run, step: StepDefinition[..., Any], inv: Invocation, exc: BaseException) -> Value:
    """Record a step's failure: this invocation only; dependents see the cause."""
    address = inv.address
    inv.ended_at = time.time()
    remote = getattr(exc, "remote_traceback", None)  # raised on an executor's worker
    inv.error = str(exc) if remote else f"{type(exc).__name__}: {exc}"
    inv.traceback = remote or "".join(traceback.format_exception(exc))
    inv.reason = classify(exc)
    inv.category = failure_category(exc)
    # processes that joined this attempt and wait on our claim take this failure instead
    # of running the step again
    run.queue().failures[f"{run.job_id}|{run.attempt}|{address}"] = json.dumps(inv.to_json())
    release(run, address)
    run.finish(inv)
    return Value(None, cause=f"step {step.name!r} failed at {address!r}: {inv.error}")


def release(run: Run, address: str) -> None:
    if address in run.held:
        run.held.discard(address)
        run.queue().released.append(address)


def step_semaphore(run: Run, step: StepDefinition[..., Any]) -> asyncio.Semaphore | None:
    if step.concurrency is None:
        return None
    sem = run.step_sems.get(step.name)
    if sem is None:
        sem = run.step_sems[step.name] = asyncio.Semaphore(step.concurrency)
    return sem


async def call(
    run: Run,
    step: StepDefinition[..., Any],
    ctx: StepContext,
    kwargs: dict[str, Any],
    bindings: list[Binding],
) -> Any:
    for b in bindings:
        if b.loads:
            value = kwargs[b.param.name]
            if isinstance(value, Array):
                loaded = [await run.load_entity(v) for v in value.values()]
                kwargs[b.param.name] = Array.from_cells(
                    value.dim_specs, value._keys, loaded, b.param.value_type
                )
            else:
                kwargs[b.param.name] = await run.load_entity(value)
    return await run.executor.run(step, ctx, kwargs)


def encode_result(run: Run, step: StepDefinition[..., Any], value: Any) -> str:
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
        run.entities[ref.id] = value
        run.queue().entities[ref.id] = text
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


def version_str(version: Any) -> str | None:
    """A step's ``version=`` as the cache keeps it."""
    return None if version is None else str(version)
