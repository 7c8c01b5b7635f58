"""A step operation as a stream: its invocations planned a chunk at a time and resolved.

``Run.schedule`` spawns ``run_step_op`` for every step operation. Once the operation's inputs
are resolved, ``plan_stream`` (``_binding``) plans its invocations on demand, a chunk of at
least ``STREAM_CHUNK`` at a time; ``STREAM_PUMPS`` pumps each take the next chunk, read the
earlier attempt's records of that chunk (on resume), queue its new input values, resolve it
(``_resolution``: record, cache, claim, run) and put its outcomes in place, so the first
invocations start before the last are planned and the plans held at once stay bounded.
"""

from __future__ import annotations

import asyncio
import typing
from typing import TYPE_CHECKING, Any

from fxtr.experiment._binding import Operation, plan_stream
from fxtr.experiment._graph import Node, Value, assemble
from fxtr.experiment._resolution import resolve
from fxtr.models._slots import parking

if TYPE_CHECKING:
    from fxtr.experiment._definition import StepDefinition
    from fxtr.experiment._engine import Run

STREAM_CHUNK = 512
"""Invocations of a step operation planned and resolved together (at least ``concurrency``)."""
STREAM_PUMPS = 3
"""Chunks of one operation in flight at once: while one waits on its slowest invocations,
the others keep ``concurrency`` steps busy."""


async def run_step_op(run: Run, op: Operation, step: StepDefinition[..., Any], node: Node) -> None:
    values = [await b.node.future for b in op.bindings]
    result_param = step.signature.result
    assert result_param is not None
    cause = next((v.cause for v in values if v.cause), None)
    if cause is not None:
        node.future.set_result(Value(None, cause=cause))
        return
    chunk = max(STREAM_CHUNK, run.concurrency)
    combos, chunks = plan_stream(run, op, step, values, chunk)
    outcomes: list[Value | None] = [None] * len(combos)

    async def pump() -> None:
        # each pump takes the next chunk of plans (the iterator plans it on demand),
        # resolves it (record, cache, claim, run) and puts its outcomes in place
        for start, plans, texts in chunks:
            loader = getattr(run.prior, "load", None)
            if loader is not None:  # an earlier attempt's records, read a chunk at a time
                loader([p.address for p in plans], run.mode == "verify")
                # the inputs an earlier record names were stored with it: not again
                for p in plans:
                    recorded = run.prior.get(p.address)
                    if recorded is not None:
                        for fp in recorded.input_fingerprints.values():
                            texts.pop(fp, None)
            if texts:
                run.queue().values.update(texts)
            got = await resolve(run, step, plans, op.bindings)
            if loader is not None:
                run.prior.forget([p.address for p in plans])  # type: ignore[attr-defined]
            outcomes[start : start + len(got)] = got
            del plans, got
            await asyncio.sleep(0)  # a chunk served from the cache never suspends

    if len(combos) <= chunk:  # one chunk (an agent's turn, a scalar step): no siblings
        await pump()
    else:
        parked = 0
        pumps: list[asyncio.Future[None]] = []

        def more() -> None:  # a chunk's worth of invocations parked on batches: a pump more
            nonlocal parked
            parked += 1
            if parked % chunk == 0:
                pumps.append(asyncio.ensure_future(pump()))

        token = parking.set(more)
        pumps.extend(asyncio.ensure_future(pump()) for _ in range(STREAM_PUMPS))
        parking.reset(token)
        try:
            while True:  # until no pump was added while the others ran
                count = len(pumps)
                await asyncio.gather(*pumps)
                if len(pumps) == count:
                    break
        except BaseException:
            # a pump that raised (a DeterminismError, a store error) stops its siblings:
            # none goes on claiming and running chunks behind the job's back
            for task in pumps:
                task.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            raise
    node.future.set_result(
        assemble(
            op.address,
            node,
            combos,
            result_param.dims,
            typing.cast("list[Value]", outcomes),
            f"step {step.name!r}",
            sampled=op.samples is not None,
        )
    )
