"""Resolution: each planned invocation from the record, the step cache, a claim, or a run.

``resolve`` is the one place where the conflict policy applies: an address keeps up to
``keep`` entries, one per fingerprint; the current one's fingerprint, or a kept one's (which
becomes current), is a hit; a fingerprint the address never held is ``needs_review`` under
``review``, or a rerun (the current entry kept) under ``overwrite`` or a changed
``version=``; no entry is claimed and run. A claim won after another process committed the
address is read again and goes through the same policy. The runner (``_engine``) calls
``resolve``; ``resolve`` calls ``_replay`` in a verifying pass and ``_invocation.invoke`` to
run a step.
"""

from __future__ import annotations

import asyncio
import json
import time
import typing
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fxtr.experiment._graph import Value, decoded
from fxtr.experiment._invocation import invoke
from fxtr.experiment._records import Invocation
from fxtr.experiment._replay import replayed
from fxtr.experiment._why import explain, review_summary
from fxtr.models._mock import code_changed
from fxtr.models._slots import parking
from fxtr.store import CacheEntry

YIELD_AFTER = 0.05
"""Seconds a worker runs invocations back to back before it lets the loop have a turn."""

if TYPE_CHECKING:
    from fxtr.experiment._binding import Binding, Plan
    from fxtr.experiment._definition import StepDefinition
    from fxtr.experiment._engine import Run


Decision = tuple[str, Any]
"""What the conflict policy says about an entry: ``("hit", value)``, ``("review", value)``
(the invocation's outcome, already recorded), or ``("run", replaced)`` (the text of the
current entry the run displaces, kept at the address, or None)."""


def matches(entry: CacheEntry, fp: str | None) -> bool:
    """Whether an entry holds the result for a fingerprint (and the code its calls reached)."""
    return entry.fingerprint == fp and (entry.code is None or not code_changed(entry.code))


def decide(
    run: Run,
    step: StepDefinition[..., Any],
    plan: Plan,
    entry: CacheEntry | None,
    kept: list[CacheEntry] | None = None,
) -> Decision:
    """The conflict policy, for the entries found at a planned invocation's address.

    ``entry`` is the current one, ``kept`` the address's other entries with the same
    fingerprint (``Store.get_kept``). The current entry's fingerprint: a hit. A kept entry's:
    a hit, and it becomes current. No entry, or a damaged one (counted in ``run.damaged``):
    run. A fingerprint the address never held: under ``review`` (the default) the invocation
    awaits review and does not run; under ``overwrite``, or when the step's ``version=``
    changed on purpose, it runs and the current entry is kept beside the new one.
    """
    address, fps, fp = plan.address, plan.fps, plan.fingerprint
    if entry is None:
        return "run", None
    if not entry.damaged and matches(entry, fp):
        value = hit(run, step, address, fps, fp, entry)
        if value is not None:
            return "hit", value
        entry = CacheEntry.damaged_entry()  # its result cannot be decoded
    held = False  # a kept entry of these inputs, damaged: they are no conflict
    for other in kept or ():
        if not other.damaged and matches(other, fp):
            value = hit(run, step, address, fps, fp, other)
            if value is not None:
                run.queue().current[address] = other.key
                return "hit", value
        held = held or other.damaged or matches(other, fp)
    if entry.damaged or held:  # never served: recomputed, and counted
        run.damaged[address] = None
        return "run", None if entry.damaged else entry.to_text()
    if entry.version != version_str(step.version) or run.conflict == "overwrite":
        return "run", entry.to_text()
    same_inputs = entry.meta.get("inputs") == fps
    if not step.code_counts and same_inputs and matches(entry, entry.fingerprint):
        # written while the source of a versioned step was in its fingerprint (before the
        # version stood for the code): the same version and inputs, so the same result
        value = hit(run, step, address, fps, fp, entry)
        if value is not None:
            return "hit", value
    conflict = conflict_of(run, step, entry, fps)
    inv = Invocation(
        address,
        step.name,
        "needs_review",
        fingerprint=fp,
        input_fingerprints=fps,
        conflict=conflict,
        changed=conflict["changed"],
        found=entry.key,
        attempt=run.attempt,
        error=f"cache conflict: {conflict['summary']}",
    )
    run.finish(inv)
    return "review", Value(None, cause=f"needs review at {address!r}: {conflict['summary']}")


async def resolve(
    run: Run,
    step: StepDefinition[..., Any],
    plans: list[Plan],
    bindings: list[Binding],
) -> list[Value]:
    """Resolve each planned invocation: replay, earlier attempt, cache, or run."""
    out: list[Value | None] = [None] * len(plans)
    todo: list[int] = []
    for i, plan in enumerate(plans):
        if plan.skip is not None:
            inv = Invocation(
                plan.address, step.name, "skipped", error=plan.skip, attempt=run.attempt
            )
            run.finish(inv)
            out[i] = Value(None, cause=f"skipped at {plan.address!r}: {plan.skip}")
        elif run.mode == "verify":
            out[i] = replayed(run, step, plan.address, plan.fps, plan.fingerprint)
        else:
            prior = run.prior.get(plan.address)
            if (
                prior is not None
                and prior.status == "succeeded"
                and prior.fingerprint == plan.fingerprint
            ):
                out[i] = from_prior(run, step, plan, prior)
            else:
                todo.append(i)
    if todo:
        entries = run.store.get_entries([plans[i].address for i in todo])
        kept = kept_for(run, [plans[i] for i in todo], entries)
        to_run: list[tuple[int, str | None]] = []
        for i in todo:
            address = plans[i].address
            verdict, value = decide(run, step, plans[i], entries.get(address), kept.get(address))
            if verdict == "run":
                to_run.append((i, value))
            else:
                out[i] = value
        if to_run:
            await _claim_and_run(run, step, plans, bindings, to_run, out)
    return typing.cast("list[Value]", out)


def kept_for(
    run: Run, plans: list[Plan], entries: dict[str, CacheEntry]
) -> dict[str, list[CacheEntry]]:
    """The kept entries with each plan's fingerprint, where the current entry is another's.

    Nothing is read when every current entry matches (a cached rerun).
    """
    wanted = {}
    for plan in plans:
        entry = entries.get(plan.address)
        if (
            entry is not None
            and plan.fingerprint is not None
            and not matches(entry, plan.fingerprint)
        ):
            wanted[plan.address] = plan.fingerprint
    return run.store.get_kept(wanted) if wanted else {}


async def _claim_and_run(
    run: Run,
    step: StepDefinition[..., Any],
    plans: list[Plan],
    bindings: list[Binding],
    to_run: list[tuple[int, str | None]],
    out: list[Value | None],
) -> None:
    """Claim the addresses to run; run the won ones, wait on the others' holders."""
    claims = run.store.claim([plans[i].address for i, _ in to_run], run.holder, run.lease)
    # another process may have finished an address between our read and our claim: read
    # the won ones again, so a result is never computed twice, nor replaced unreviewed
    won = [plans[i].address for i, _ in to_run if claims[plans[i].address] is None]
    landed = run.store.get_entries(won) if won else {}
    landed_kept = kept_for(run, [plans[i] for i, _ in to_run if plans[i].address in landed], landed)
    failed = failed_elsewhere(run, [a for a in won if a not in landed])
    mine: list[tuple[int, str | None]] = []
    theirs: list[tuple[int, str | None]] = []
    for i, replaced in to_run:
        address = plans[i].address
        if claims[address] is not None:
            theirs.append((i, replaced))
            continue
        if address in failed:
            run.queue().released.append(address)
            out[i] = failed[address]
            continue
        entry = landed.get(address)
        if entry is not None and (replaced is None or entry.to_text() != replaced):
            verdict, value = decide(run, step, plans[i], entry, landed_kept.get(address))
            if verdict != "run":
                run.queue().released.append(address)
                out[i] = value
                continue
            replaced = value
        run.held.add(address)
        mine.append((i, replaced))

    async def worker(queue: Iterator[tuple[int, str | None]]) -> None:
        turn = time.monotonic()
        for i, replaced in queue:
            out[i] = await invoke(run, step, plans[i], bindings, replaced)
            if time.monotonic() - turn >= YIELD_AFTER:
                # steps that never suspend would keep the loop to themselves: let it beat,
                # flush the batch and renew the claims
                await asyncio.sleep(0)
                turn = time.monotonic()

    # a bounded pool of workers, not one task per invocation: a 100,000-invocation
    # operation costs the memory of ``concurrency`` tasks, not of 100,000
    queue = iter(mine)
    extra: list[asyncio.Future[None]] = []
    outer = parking.get()

    def more() -> None:  # an invocation parked on a batch: a worker more meanwhile
        extra.append(asyncio.ensure_future(worker(queue)))
        if outer is not None:
            outer()

    token = parking.set(more)
    try:
        workers = [worker(queue) for _ in range(min(len(mine), run.concurrency))]
        waits = [_wait_one(run, step, plans, bindings, i, r, out) for i, r in theirs]
        if len(workers) + len(waits) == 1:  # one invocation (an agent's turn): no task for it
            await (workers or waits)[0]
        else:
            await asyncio.gather(*workers, *waits)
        while extra:
            await extra.pop()
    finally:
        parking.reset(token)


async def _wait_one(
    run: Run,
    step: StepDefinition[..., Any],
    plans: list[Plan],
    bindings: list[Binding],
    i: int,
    replaced: str | None,
    out: list[Value | None],
) -> None:
    out[i] = await await_claim(run, step, plans[i], bindings, replaced)


def from_prior(run: Run, step: StepDefinition[..., Any], plan: Plan, prior: Invocation) -> Value:
    """An earlier attempt's result: its usage, logs and times stay with it."""
    return served(
        run,
        step,
        plan.address,
        plan.fps,
        plan.fingerprint,
        prior.result_text,
        prior.usage(),
        logs=prior.logs,
        warnings=prior.warnings,
        started_at=prior.started_at,
        ended_at=prior.ended_at,
    )


def failed_elsewhere(run: Run, addresses: list[str]) -> dict[str, Value]:
    """Invocations of this attempt that another process of the same run already failed.

    Only processes that joined one attempt (``run_tag``) look: they take the failure
    instead of running the step again.
    """
    if not run.shared or not addresses:
        return {}
    prefix = f"{run.job_id}|{run.attempt}|"
    out: dict[str, Value] = {}
    for text in run.store.get_failures([prefix + a for a in addresses]).values():
        inv = Invocation.from_json(json.loads(text))
        run.finish(inv)
        out[inv.address] = Value(None, cause=f"failed at {inv.address!r}: {inv.error}")
    return out


def hit(
    run: Run,
    step: StepDefinition[..., Any],
    address: str,
    fps: dict[str, str],
    fp: str | None,
    entry: CacheEntry,
) -> Value | None:
    """The entry's result served, or None when its text cannot be decoded.

    Such an entry is damaged though its checksum matched (written damaged, or by a buggy or
    newer writer): a miss, recomputed and counted, never a crash. So is one that names a
    part (``StepContext.put_blobs``) the store lacks, or holds damaged: never a hit that
    fails later.
    """
    parts = entry.parts
    if parts and len(run.store.get_blobs(parts)) < len(set(parts)):
        return None
    try:
        return served(run, step, address, fps, fp, entry.result, entry.usage)
    except _UNDECODABLE:
        return None


_UNDECODABLE = (ValueError, TypeError, KeyError, RecursionError)
"""What decoding a damaged result text raises (``JSONDecodeError`` is a ``ValueError``)."""


def served(
    run: Run,
    step: StepDefinition[..., Any],
    address: str,
    fps: dict[str, str],
    fp: str | None,
    result_text: str | None,
    usage: dict[str, Any] | None,
    **recorded: Any,
) -> Value:
    """An invocation served without running (step cache or an earlier attempt).

    The result is decoded first: a text that cannot be decoded raises before anything is
    recorded.
    """
    value = Value(decoded(result_text))
    inv = Invocation(
        address,
        step.name,
        "succeeded",
        from_cache=True,
        fingerprint=fp,
        input_fingerprints=fps,
        result_text=result_text,
        attempt=run.attempt,
        **recorded,
    )
    if usage:
        inv.take_usage(usage)
    run.finish(inv)
    return value


async def await_claim(
    run: Run,
    step: StepDefinition[..., Any],
    plan: Plan,
    bindings: list[Binding],
    replaced: str | None,
) -> Value:
    """Another process runs this address: wait for its result, or take the claim over.

    What the holder committed goes through the conflict policy like any entry (it may come
    from other inputs: another version of the eval on a shared store).
    """
    address, fp = plan.address, plan.fingerprint
    while True:
        await asyncio.sleep(run.store.wait_hint())
        entry = run.store.get_entry(address)
        if entry is not None and not entry.damaged and matches(entry, fp):
            value = hit(run, step, address, plan.fps, fp, entry)
            if value is not None:
                return value
        failed = failed_elsewhere(run, [address]).get(address)
        if failed is not None:
            return failed
        if run.store.claim([address], run.holder, run.lease)[address] is None:
            # the holder may have finished between our read and our claim
            entry = run.store.get_entry(address)
            if entry is not None and (replaced is None or entry.to_text() != replaced):
                kept = kept_for(run, [plan], {address: entry}).get(address)
                verdict, value = decide(run, step, plan, entry, kept)
                if verdict != "run":
                    run.queue().released.append(address)
                    return value  # type: ignore[no-any-return]
                replaced = value
            run.held.add(address)
            return await invoke(run, step, plan, bindings, replaced)


def version_str(version: Any) -> str | None:
    return None if version is None else str(version)


def conflict_of(
    run: Run, step: StepDefinition[..., Any], entry: CacheEntry, fps: dict[str, str]
) -> dict[str, Any]:
    """What a review is about: the inputs, code and models that differ from the entry."""
    meta = entry.meta
    cached_inputs = meta.get("inputs", {})
    changed = sorted(k for k in set(fps) | set(cached_inputs) if fps.get(k) != cached_inputs.get(k))
    parts = explain(run, step, fps, entry)
    source = step.code_counts and meta.get("source") != step.source_hash
    what = review_summary(run, step, fps, entry)
    return {
        "inputs": changed,
        "source": source,
        "changed": parts,
        "cached_job": meta.get("job_id"),
        "summary": "; ".join(what)
        + ". Rerun with conflict='overwrite' (--fxtr-cache-conflict=overwrite) to run it; "
        "the entry it replaces stays kept (`fxtr cache why ADDRESS` says what changed)",
    }
