"""A finished trajectory served from its record: two reads instead of one per step.

A trajectory is a function of its inputs (the agent, the model, the case, the sample), the
code that runs it (this package, the message types, the encoding) and the results of its
steps. When it finishes, the loop keeps its *record* as a cache entry at the trajectory's own
address (``.../agent[model=...,case=...,sample=...]``), keyed by a fingerprint of those
inputs and that code: the operations its body scheduled, and for each step its address, its
fingerprint and a digest of its result.

A later run of the same trajectory reads the record (one read) and the current entries of
all its steps (one batched read). When every step's entry still holds the recorded
fingerprint and the same result (and the code its calls reached, a mock's reply, has not
changed), running the body again could only schedule the same operations and be served the
same results: the body is skipped, and every turn, tool call and simulated-user reply is
recorded as a from-cache invocation, exactly as the step-by-step replay would have recorded
it. Anything else (no record, another fingerprint, a step's entry changed, damaged, missing
or replaced) runs the loop step by step as before, where the conflict policy applies, and
keeps a new record. So the record is a shortcut, never a source of truth: a changed prompt,
tool, case, model or mock still misses where it did.

Only a live pass from scratch takes it: a verifying replay runs the body (that is what it
verifies), and a resumed job (an earlier attempt's records) goes step by step.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import time
import weakref
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fxtr.agents._types import Trajectory
from fxtr.experiment._array import Array
from fxtr.experiment._encoding import SCHEMA, decode_text, encode_text, fingerprint_text
from fxtr.experiment._entity import BoundID
from fxtr.experiment._graph import Node, Value
from fxtr.experiment._handle import ArrayHandle, make_handle
from fxtr.experiment._records import Invocation
from fxtr.experiment._replay import record_op
from fxtr.experiment._resolution import matches
from fxtr.experiment.errors import UpstreamFailedError
from fxtr.store import CacheEntry

if TYPE_CHECKING:
    from fxtr.experiment._context import WorkflowContext
    from fxtr.experiment._engine import Run

FORMAT = "fxtr.agents.record/1"
"""Version of the record's layout; part of its fingerprint."""
STEP = "fxtr.agent"
"""The record's ``step`` in its entry's metadata (the trajectory's workflow name)."""

_AGENTS: dict[int, tuple[Any, str]] = {}
"""Agent fingerprints by object (the same agent runs every trajectory of an eval)."""


@cache
def code_digest() -> str:
    """A digest of the code a trajectory's steps and their inputs come from.

    The agent package, the kit's prompt building, the message types and the canonical
    encoding: editing any of them makes every record a miss (the loop then runs step by
    step, where the step cache decides).
    """
    import fxtr
    import fxtr.evals._evaluate as kit
    import fxtr.experiment._encoding as encoding
    import fxtr.models._types as types

    here = Path(__file__).parent
    files = sorted(here.glob("*.py")) + [Path(m.__file__ or "") for m in (kit, types, encoding)]
    digest = hashlib.sha256(f"{FORMAT}|{SCHEMA}|{fxtr.__version__}".encode())
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _agent_fingerprint(agent: Any) -> str:
    known = _AGENTS.get(id(agent))
    if known is not None and known[0] is agent:
        return known[1]
    if len(_AGENTS) > 64:
        _AGENTS.clear()
    fp = fingerprint_text(encode_text(agent))
    _AGENTS[id(agent)] = (agent, fp)
    return fp


def record_key(agent: Any, model: BoundID[Any], case: BoundID[Any], sample: int | None) -> str:
    """The fingerprint a trajectory's record is kept under: its inputs and its code."""
    parts = [FORMAT, code_digest(), _agent_fingerprint(agent), model.id, case.id, sample]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _digest(result: str) -> str:
    return hashlib.blake2b(result.encode(), digest_size=16).hexdigest()


_SERVED: collections.OrderedDict[tuple[str, int], set[str]] = collections.OrderedDict()
"""The trajectories each recent attempt's live pass served from their records, for its
verifying pass (bounded: the last ``_SERVED_ATTEMPTS`` attempts of this process)."""
_SERVED_ATTEMPTS = 8


def _served(run: Run) -> set[str]:
    key = (run.job_id, run.attempt)
    served = _SERVED.get(key)
    if served is None:
        served = _SERVED[key] = set()
        while len(_SERVED) > _SERVED_ATTEMPTS:
            _SERVED.popitem(last=False)
    return served


def usable(run: Run) -> bool:
    """Whether this pass may serve records.

    A live pass of a job from scratch may, and the verifying pass of an attempt whose live
    pass served some (those, and only those: a body that ran is replayed).
    """
    if run.mode == "verify":
        return bool(_SERVED.get((run.job_id, run.attempt)))
    return run.mode == "live" and type(run.prior) is dict and not run.prior and not run.outage


class _Reads:
    """The entry reads of the trajectories that start together, one query for all of them.

    The trajectories of an eval start in the same turn of the event loop; each asks for its
    record (then its steps' entries) and waits, and one read at the end of that turn serves
    them all: two reads for a thousand trajectories rather than two each.
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        self.pending: list[tuple[list[str], asyncio.Future[dict[str, CacheEntry]]]] = []

    def get(self, addresses: list[str]) -> asyncio.Future[dict[str, CacheEntry]]:
        """The current entries among ``addresses``, once this turn's reads are made."""
        future = asyncio.get_running_loop().create_future()
        if not self.pending:
            asyncio.get_running_loop().call_soon(self._read)
        self.pending.append((addresses, future))
        return future

    def _read(self) -> None:
        pending, self.pending = self.pending, []
        try:
            every = dict.fromkeys(a for addresses, _ in pending for a in addresses)
            found = self.run.store.get_entries(list(every))
        except Exception as exc:  # a store outage: each trajectory raises it, as before
            for _, future in pending:
                if not future.done():
                    future.set_exception(exc)
            return
        for addresses, future in pending:
            if not future.done():
                future.set_result({a: found[a] for a in addresses if a in found})


_READS: weakref.WeakKeyDictionary[Run, _Reads] = weakref.WeakKeyDictionary()


def _reads(run: Run) -> _Reads:
    reads = _READS.get(run)
    if reads is None:
        reads = _READS[run] = _Reads(run)
    return reads


async def serve(context: WorkflowContext, key: str) -> ArrayHandle[Any] | None:
    """The trajectory served from its record, or None when it must run step by step.

    Two reads (shared with the trajectories that start with it): the record at the
    trajectory's address, then every step's current entry. Nothing is recorded unless every
    step checks out.
    """
    run: Run = context._run
    address = context.address
    verify = run.mode == "verify"
    if verify and address not in _SERVED.get((run.job_id, run.attempt), ()):
        return None  # its body ran in the live pass: the verifying pass replays it
    reads = _reads(run)
    entry = (await reads.get([address])).get(address)
    if entry is None:
        return None
    if entry.damaged or entry.fingerprint != key:  # another prompt's record may be kept
        kept = run.store.get_kept({address: key}).get(address, [])
        entry = next((e for e in kept if not e.damaged and e.fingerprint == key), None)
        if entry is None:
            return None
        run.queue().current[address] = entry.key
    try:
        record = json.loads(entry.result)
        ops: list[dict[str, Any]] = record["ops"]
        steps: list[list[Any]] = record["steps"]
        result_at: str = record["result"]
    except (ValueError, KeyError, TypeError):  # a damaged record is a miss
        return None
    addresses = [f"{address}/{s[0]}" for s in steps]
    found: list[CacheEntry] = []
    if verify:  # a pure replay: every step as this attempt recorded it
        for at, (_, _, fp, _, digest) in zip(addresses, steps, strict=True):
            inv = run.prior.get(at)
            if inv is None or inv.status != "succeeded" or inv.fingerprint != fp:
                return None
            if inv.result_text is None or _digest(inv.result_text) != digest:
                return None
            found.append(CacheEntry(fp, None, inv.result_text))
    else:
        entries = await reads.get(addresses)
        for at, (_, _, fp, _, digest) in zip(addresses, steps, strict=True):
            e = entries.get(at)
            if e is None or e.damaged or not matches(e, fp) or _digest(e.result) != digest:
                return None
            found.append(e)
        parts = {p for e in found for p in e.parts}
        if parts and len(run.store.get_blobs(parts)) < len(parts):
            return None  # a step names a part the store lost: step by step, where it misses
    try:
        result = decode_text(found[[s[0] for s in steps].index(result_at)].result)
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
    for desc in ops:  # compared with the operations recorded before, as the body's would be
        record_op(run, context._record, desc)
    if not verify:
        _record(run, addresses, steps, found)
        _served(run).add(address)
    value_type = BoundID[Trajectory]
    node = Node(
        run,
        (),
        value_type,
        f"{address}/{result_at}",
        "step 'fxtr.agents.trajectory'",
        Value(Array.scalar(result, value_type)),
    )
    return make_handle(node)


def _record(
    run: Run, addresses: list[str], steps: list[list[Any]], found: list[CacheEntry]
) -> None:
    """Record every step of a trajectory served from its record, from the cache."""
    for at, (_, step, fp, fps, _), e in zip(addresses, steps, found, strict=True):
        inv = Invocation(
            at,
            step,
            "succeeded",
            from_cache=True,
            fingerprint=fp,
            input_fingerprints=fps,
            result_text=e.result,
            attempt=run.attempt,
        )
        if e.usage:
            inv.take_usage(e.usage)
        run.finish(inv)


async def keep(context: WorkflowContext, key: str, done: ArrayHandle[Any]) -> None:
    """Keep the record of a trajectory whose every step succeeded (``done``: its last)."""
    run: Run = context._run
    try:
        await done.item()
    except UpstreamFailedError:
        return
    if run.mode != "live" or not usable(run):
        return
    address = context.address
    ops = run.ops.get(address, [])
    steps: list[list[Any]] = []
    for desc in ops:
        if desc.get("kind") != "step" or desc.get("map_over") or "samples" in desc:
            return  # one invocation per operation is what a record holds
        inv = run.invocations.get(f"{address}/{desc['name']}")
        if inv is None or inv.status != "succeeded" or inv.result_text is None:
            return
        fps = dict(inv.input_fingerprints)
        steps.append([desc["name"], inv.step, inv.fingerprint, fps, _digest(inv.result_text)])
    if not steps:
        return
    record = {"ops": ops, "steps": steps, "result": steps[-1][0]}
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    meta = {
        "step": STEP,
        "source": code_digest(),
        "inputs": {},
        "job_id": run.job_id,
        "created_at": time.time(),
    }
    run.queue().entries[address] = CacheEntry(key, None, text, None, meta).to_text()
