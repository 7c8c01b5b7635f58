"""Jobs: launch a root workflow, resume it, and what comes back."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from fxtr.experiment._array import Array
from fxtr.experiment._definition import WorkflowDefinition, find_workflow
from fxtr.experiment._encoding import decode_text
from fxtr.experiment._engine import Node, Run
from fxtr.experiment._entity import BoundID
from fxtr.experiment._hermetic import install as install_hermetic
from fxtr.experiment._job_inputs import (
    check_root,
    encoded_inputs,
    input_sources,
    prepare_inputs,
    root_kwargs,
)
from fxtr.experiment._origin import load_origin, script_origin
from fxtr.experiment._records import Invocation, StoredRecords, WorkflowRun
from fxtr.experiment._types import is_entity_type
from fxtr.store import Store, open_store
from fxtr.store._base import DEFAULT_KEEP, StoreOutage, redact_json

JobStatus = Literal["succeeded", "failed", "needs_review"]
CONFLICT_POLICIES = ("review", "overwrite")


@dataclasses.dataclass(eq=False)
class JobResult:
    """What one attempt of a job ended with."""

    job_id: str
    attempt: int
    """Attempts are numbered from 1; ``resume`` returns attempt n+1 of the same job."""
    status: JobStatus
    output: Array[Any] | None = dataclasses.field(repr=False)
    """The root workflow's result, or ``None`` when the job did not succeed."""
    invocations: list[Invocation] = dataclasses.field(repr=False)
    """One record per step invocation, in completion order."""
    workflows: list[WorkflowRun] = dataclasses.field(repr=False)
    """One record per workflow invocation (the root first)."""
    store: Store = dataclasses.field(repr=False)
    ops: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict, repr=False)
    """The operations each workflow invocation scheduled, by workflow address."""
    partial_output: Array[Any] | None = dataclasses.field(default=None, repr=False)
    """The output with every cell that has a value (``None`` in the others), even when the
    job did not succeed; ``None`` when not even the keys are known."""
    missing: dict[tuple[Any, ...], str] = dataclasses.field(default_factory=dict, repr=False)
    """Cells of ``partial_output`` with no value, and why (failed, skipped, in review)."""
    damaged: list[str] = dataclasses.field(default_factory=list, repr=False)
    """Addresses whose stored cache entry was damaged (failed its checksum, or unreadable):
    each was recomputed instead of served. Also in the job record, per attempt."""

    @property
    def conflicts(self) -> list[Invocation]:
        """Invocations that await review, each with what differs from the cache."""
        return [i for i in self.invocations if i.status == "needs_review"]

    def invocation(self, address: str) -> Invocation:
        """The record at one address.

        Raises:
            KeyError: no invocation has that address.
        """
        for inv in self.invocations:
            if inv.address == address:
                return inv
        msg = f"Job {self.job_id} has no invocation at {address!r}."
        raise KeyError(msg)

    @property
    def graph(self) -> Any:
        """The execution graph of this attempt (``fxtr.tracing.TaskGraph``)."""
        from fxtr.tracing._jobgraph import job_graph

        return job_graph(self)


def _git_commit() -> tuple[str | None, bool]:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
        if head.returncode != 0:
            return None, False
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return head.stdout.strip(), bool(dirty.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, False


def _source_file(workflow: WorkflowDefinition[..., Any]) -> str | None:
    import inspect

    try:
        return inspect.getsourcefile(workflow.fn)
    except TypeError:
        return None


def _check_options(conflict: str, concurrency: int, cache_keep: int = DEFAULT_KEEP) -> None:
    if not isinstance(cache_keep, int) or isinstance(cache_keep, bool) or cache_keep < 1:
        msg = f"cache_keep must be a positive int (entries kept per address), got {cache_keep!r}."
        raise ValueError(msg)
    if conflict not in CONFLICT_POLICIES:
        msg = f"{conflict!r} is not a valid conflict policy. Valid policies: review, overwrite."
        raise ValueError(msg)
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        msg = f"concurrency must be a positive int, got {concurrency!r}."
        raise ValueError(msg)


def _open(store: Any) -> Store:
    opened: Store = open_store(store)
    return opened


def summarize(invocations: Iterable[Invocation]) -> dict[str, Any]:
    """What listing a job shows, computed once as its attempt ends (the job record keeps it).

    The counts of ``fxtr jobs`` (ran, cached, failed, tokens and dollars spent, as
    ``fxtr.report.job_row`` computes them from the records) and, per operation (an address
    without its map keys), the counts of ``fxtr show``'s tree and the viewer's graph (as
    ``fxtr.report.operation_graph`` does): listing a job then reads its record, not its
    invocation records.
    """
    from fxtr.tracing._jobgraph import strip_keys

    total: dict[str, Any] = {"invocations": 0, "ran": 0, "cached": 0, "failed": 0}
    ops: dict[str, dict[str, Any]] = {}
    stripped: dict[str, str] = {}
    priced: list[Invocation] = []
    for inv in invocations:
        if inv.cost_by_model or inv.model_calls:
            priced.append(inv)
        address = inv.address
        cut = address.rfind("[") if address.endswith("]") and '"' not in address else -1
        head = address[:cut] if cut > 0 else address
        key = stripped.get(head)
        if key is None:
            key = stripped[head] = strip_keys(head)
        op = ops.get(key)
        if op is None:
            op = ops[key] = {
                "step": inv.step,
                "invocations": 0,
                "counts": {},
                "ran": 0,
                "cached": 0,
                "input_tokens": 0,
                "output_tokens": 0,
                "cost_usd": 0.0,
                "unpriced": 0,
                "reasons": {},
            }
        op["invocations"] += 1
        op["counts"][inv.status] = op["counts"].get(inv.status, 0) + 1
        total["invocations"] += 1
        if inv.status == "failed":
            total["failed"] += 1
        if inv.reason:
            op["reasons"][inv.reason] = op["reasons"].get(inv.reason, 0) + 1
        if inv.from_cache:
            op["cached"] += 1
            total["cached"] += 1
            continue
        if inv.started_at:
            op["ran"] += 1
            total["ran"] += 1
            op["input_tokens"] += inv.input_tokens
            op["output_tokens"] += inv.output_tokens
            op["cost_usd"] += inv.cost_usd or 0.0
            if any(row.get("usd") is None for row in inv.cost_by_model.values()):
                op["unpriced"] += 1  # a call nobody can price: its dollars are not 0
    # tokens and dollars as the report counts them (priced, unpriced, saved by the cache),
    # from the records that made model calls: the others add nothing
    from fxtr.report import cost_of_invocations

    cost = cost_of_invocations([i.to_json() for i in priced])
    total["tokens"] = cost["input_tokens"] + cost["output_tokens"]
    total["cost_usd"] = cost["usd"]
    return {**total, "operations": ops}


def _status(run: Run) -> JobStatus:
    statuses = {inv.status for inv in run.invocations.values()}
    if "failed" in statuses or any(w.status != "succeeded" for w in run.workflows.values()):
        return "failed"
    if "needs_review" in statuses or "skipped" in statuses:
        return "needs_review"
    return "succeeded"


async def _attempt(
    store: Store,
    wf: WorkflowDefinition[..., Any],
    record: dict[str, Any],
    inputs: Mapping[str, Any],
    *,
    prior: Mapping[str, Invocation],
    prior_ops: dict[str, list[dict[str, Any]]] | None,
    conflict: str,
    verify: bool,
    concurrency: int,
    executor: Any,
    on_invocation: Any,
    hermetic: bool = True,
    run_tag: str | None = None,
    cache_keep: int = DEFAULT_KEEP,
) -> JobResult:
    if hermetic:
        install_hermetic()
    job_id = record["job_id"]
    root_address = record.get("root") or wf.name
    last = record["attempts"][-1] if record["attempts"] else None
    if run_tag is not None and last is not None and last.get("run") == run_tag:
        # another process of the same run (a pytest-xdist worker) started this attempt: join it
        info: dict[str, Any] = last
        attempt = int(last["attempt"])
        prior_ops = None
    else:
        attempt = len(record["attempts"]) + 1
        from fxtr.report._names import process_identity  # who runs it: see `interrupted`

        info = {"attempt": attempt, "started_at": time.time(), "status": "running"}
        info.update(process_identity())
        if run_tag is not None:
            info["run"] = run_tag
        record["attempts"].append(info)
    run = Run(
        store=store,
        job_id=job_id,
        attempt=attempt,
        conflict=conflict,
        concurrency=concurrency,
        prior=prior,
        expected_ops=prior_ops,
        executor=executor,
        hermetic=hermetic,
        shared=run_tag is not None,
        keep=cache_keep,
        holder=f"{socket.gethostname()}:{os.getpid()}:{job_id}:{attempt}:{uuid.uuid4().hex[:6]}",
    )
    run.on_invocation = on_invocation
    try:
        prepared = await prepare_inputs(wf, inputs, run)
        if "inputs" not in record:
            record["inputs"] = encoded_inputs(prepared)
            sources = input_sources(inputs)  # project-array snapshots, by input (DESIGN §19)
            if sources:
                record["snapshots"] = sources
        store.put_job(redact_json(record))
        kwargs = root_kwargs(wf, prepared, run)
        root: Node | None = await run.drive(run.run_body(wf, root_address, kwargs))
        status = _status(run)
        store.put_ops(job_id, attempt, redact_json(run.ops))
        store.put_workflows(
            job_id, attempt, redact_json([w.to_json() for w in run.workflows.values()])
        )
        if verify:
            replay = Run(
                store=store,
                job_id=job_id,
                attempt=attempt,
                mode="verify",
                prior=run.invocations,
                expected_ops=run.ops,
                concurrency=concurrency,
                hermetic=False,
            )
            replay.entities = run.entities
            await replay.drive(replay.run_body(wf, root_address, root_kwargs(wf, prepared, replay)))
    except BaseException as exc:
        if isinstance(exc, StoreOutage):
            raise  # nothing can be written; the record says the attempt started: resumable
        if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
            _interrupted(info, run, exc)
        else:
            info.update(status="error", ended_at=time.time(), error=f"{type(exc).__name__}: {exc}")
        if run.damaged:
            info["damaged"] = list(run.damaged)
        if run.ops:
            store.put_ops(job_id, attempt, redact_json(run.ops))
        store.put_workflows(
            job_id, attempt, redact_json([w.to_json() for w in run.workflows.values()])
        )
        store.put_job(redact_json(record))
        raise
    partial: Array[Any] | None = None
    missing: dict[tuple[Any, ...], str] = {}
    if root is not None and root.future.done():
        value = root.future.result()
        partial, missing = value.array, dict(value.missing)
        result = wf.signature.result
        if partial is not None and result is not None and is_entity_type(result.value_type):
            loaded = [
                await run.load_entity(v) if isinstance(v, BoundID) else v for v in partial.values()
            ]
            partial = Array.from_cells(partial.dim_specs, partial._keys, loaded, result.value_type)
    output = partial if status == "succeeded" else None
    info.update(status=status, ended_at=time.time())
    if not run.shared:  # other processes of a shared attempt record invocations too
        info["summary"] = summarize(run.invocations.values())
    if run.damaged:
        info["damaged"] = list(run.damaged)
    store.put_job(redact_json(record))
    return JobResult(
        job_id=job_id,
        attempt=attempt,
        status=status,
        output=output,
        invocations=list(run.invocations.values()),
        workflows=list(run.workflows.values()),
        store=store,
        ops=run.ops,
        partial_output=partial,
        missing=missing,
        damaged=list(run.damaged),
    )


def _interrupted(info: dict[str, Any], run: Run, exc: BaseException) -> None:
    """Record an attempt stopped from outside (Ctrl-C, a cancelled task) as ``interrupted``.

    The invocations that were running are kept on the attempt (``in_flight``), and each
    workflow with one of them under it is ``interrupted``, not ``succeeded``: its body had
    scheduled everything, but its results were not all in. A resume runs what is missing.
    """
    cause = "Ctrl-C" if isinstance(exc, KeyboardInterrupt) else "the run was cancelled"
    info.update(
        status="interrupted",
        ended_at=time.time(),
        error=f"interrupted ({cause}) with {len(run.in_flight)} invocation(s) running",
        in_flight=list(run.in_flight),
    )
    for workflow in run.workflows.values():
        below = workflow.address + "/"
        if workflow.status == "running" or (
            workflow.status == "succeeded" and any(a.startswith(below) for a in run.in_flight)
        ):
            workflow.status = "interrupted"


def _joined_record(store: Store, job_id: str, run_tag: str | None) -> dict[str, Any] | None:
    """The record of a job another process of the same run launched, or None for a new job.

    Raises:
        ValueError: the store already has a job with this id from elsewhere (job ids are
            unique: two jobs' records are never mixed).
    """
    if not store.has_job(job_id):
        return None
    record = store.get_job(job_id)
    if run_tag is not None and record.get("run_tag") == run_tag:
        return record
    msg = (
        f"The store at {store.path} already has a job {job_id!r}. Resume it with "
        f"resume({job_id!r}) (fxtr resume {job_id}), or launch with another job_id "
        "(or none, for a new random one)."
    )
    raise ValueError(msg)


async def launch(
    workflow: WorkflowDefinition[..., Any],
    inputs: Mapping[str, Any] | None = None,
    *,
    store: str | os.PathLike[str] | Store = ".fxtr",
    conflict: str = "review",
    verify: bool = True,
    concurrency: int = 32,
    job_id: str | None = None,
    executor: Any = None,
    on_invocation: Any = None,
    hermetic: bool = True,
    run_tag: str | None = None,
    root: str | None = None,
    cache_keep: int = DEFAULT_KEEP,
    origin: Mapping[str, Any] | None = None,
) -> JobResult:
    """Run a job: one root workflow over its inputs.

    Args:
        workflow: the root ``@workflow``.
        inputs: per parameter, an ``Array``, a plain value (a scalar), or an entity where
            the workflow expects ``BoundID[T]`` (stored first).
        store: the project store directory (created if missing).
        conflict: ``"review"`` leaves invocations whose address holds results of other
            inputs or code only unrun and ends the job ``needs_review``; ``"overwrite"``
            reruns them, keeping the old entries beside the new ones.
        verify: replay the body at the end of the attempt to check it is deterministic.
        concurrency: at most this many steps run at once.
        job_id: an id for the job (default: a new random one).
        executor: where steps run (default: this event loop).
        on_invocation: called with each invocation record as it ends.
        hermetic: note files and environment variables that bodies touch, as warnings on
            their records.
        run_tag: processes of one run that launch or resume the same job with the same tag
            (pytest-xdist workers) join one attempt instead of each starting their own.
        root: the first segment of every address (default: the workflow's name). The
            plugin passes the eval's id, so two evals sharing a workflow never share cache
            entries. Kept in the job record; ``resume`` uses it.
        cache_keep: entries each address keeps, one per fingerprint (default 20): a run
            whose inputs match any of them is served from it.
        origin: where the job was launched from, kept in its record so another process
            can import what it names (the plugin passes pytest's; default: the script
            run as ``python job.py``, when there is one).

    Returns:
        The attempt's ``JobResult``; failures of steps are in it, not raised.

    Raises:
        ValueError: a bad option (conflict policy, concurrency, root).
        SignatureError: inputs do not fit the workflow, or the body scheduled badly.
        DeterminismError: the verifying replay differs from the attempt.
    """
    if not isinstance(workflow, WorkflowDefinition):
        msg = f"launch() needs a @workflow, got {workflow!r}."
        raise TypeError(msg)
    _check_options(conflict, concurrency, cache_keep)
    root = workflow.name if root is None else check_root(root)
    st = _open(store)
    commit, dirty = _git_commit()
    job_id = job_id or uuid.uuid4().hex[:16]
    joined = _joined_record(st, job_id, run_tag)
    record: dict[str, Any] = joined or {
        "job_id": job_id,
        "workflow": workflow.name,
        "root": root,
        "workflow_path": workflow.path,
        "workflow_file": _source_file(workflow),
        "commit": commit,
        "dirty": dirty,
        "created_at": time.time(),
        "cwd": str(Path.cwd()),
        "attempts": [],
    }
    if joined is None and (found := dict(origin) if origin else script_origin()):
        record["origin"] = found
    if run_tag is not None:
        record.setdefault("run_tag", run_tag)
    return await _attempt(
        st,
        workflow,
        record,
        dict(inputs or {}),
        prior={},
        prior_ops=None,
        conflict=conflict,
        verify=verify,
        concurrency=concurrency,
        executor=executor,
        on_invocation=on_invocation,
        hermetic=hermetic,
        run_tag=run_tag,
        cache_keep=cache_keep,
    )


async def resume(
    job_id: str,
    *,
    store: str | os.PathLike[str] | Store = ".fxtr",
    conflict: str = "review",
    verify: bool = True,
    concurrency: int = 32,
    workflow: WorkflowDefinition[..., Any] | None = None,
    executor: Any = None,
    on_invocation: Any = None,
    hermetic: bool = True,
    run_tag: str | None = None,
    root: str | None = None,
    cache_keep: int = DEFAULT_KEEP,
) -> JobResult:
    """Start the next attempt of a job: only failed, skipped or never-run invocations run.

    The addresses keep the root the job was launched with (its record says it); ``root=``
    is accepted for symmetry with ``launch`` and must agree with the record.

    Raises:
        ValueError: ``root`` differs from the job's.
        KeyError: the store has no such job (the message names the store).
        LookupError: the root workflow can no longer be imported (pass ``workflow=``).
        DeterminismError: the body schedules differently than the record.
    """
    _check_options(conflict, concurrency, cache_keep)
    st = _open(store)
    record = st.get_job(job_id)
    if workflow is None:
        load_origin(record)
    wf = workflow or find_workflow(record["workflow_path"], record.get("workflow_file"))
    recorded_root = record.get("root") or wf.name
    if root is not None and check_root(root) != recorded_root:
        msg = (
            f"resume({job_id!r}, root={root!r}): the job's addresses start with "
            f"{recorded_root!r}; leave root= out to resume it."
        )
        raise ValueError(msg)
    inputs = {k: decode_text(v) for k, v in record.get("inputs", {}).items()}
    # read a chunk at a time as the stream reaches it: work starts after one chunk's read
    prior = StoredRecords(st, job_id)
    last = len(record["attempts"])
    prior_ops = st.get_ops(job_id, last) if last else None
    return await _attempt(
        st,
        wf,
        record,
        inputs,
        prior=prior,
        prior_ops=prior_ops,
        conflict=conflict,
        verify=verify,
        concurrency=concurrency,
        executor=executor,
        on_invocation=on_invocation,
        hermetic=hermetic,
        run_tag=run_tag,
        cache_keep=cache_keep,
    )


async def verify(
    job_id: str,
    *,
    store: str | os.PathLike[str] | Store = ".fxtr",
    workflow: WorkflowDefinition[..., Any] | None = None,
) -> None:
    """Replay a recorded job's last attempt against its record, executing nothing.

    Use it to check that today's workflow code still makes the decisions the record holds.

    Raises:
        KeyError: the store has no such job.
        DeterminismError: the replay differs from the record (with a diff).
    """
    st = _open(store)
    record = st.get_job(job_id)
    wf = workflow or find_workflow(record["workflow_path"], record.get("workflow_file"))
    inputs = {k: decode_text(v) for k, v in record.get("inputs", {}).items()}
    attempt = len(record["attempts"])
    ops = st.get_ops(job_id, attempt) or {}
    prior = StoredRecords(st, job_id)
    replay = Run(
        store=st, job_id=job_id, attempt=attempt, mode="verify", prior=prior, expected_ops=ops
    )
    root = record.get("root") or wf.name
    await replay.drive(replay.run_body(wf, root, root_kwargs(wf, inputs, replay)))


def run(
    workflow: WorkflowDefinition[..., Any], inputs: Mapping[str, Any] | None = None, **options: Any
) -> JobResult:
    """``launch`` for synchronous code; works whether or not an event loop is running here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(launch(workflow, inputs, **options))
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = asyncio.run(launch(workflow, inputs, **options))
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="fxtr-run")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: JobResult = box["result"]
    return result
