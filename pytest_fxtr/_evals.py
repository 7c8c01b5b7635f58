"""Evals: marked, parametrized test functions, one job per eval per run, sliced per item."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Callable
from typing import Any

import pytest

MARKER = "fxtr"
_NOT_GIVEN = object()


@dataclasses.dataclass(eq=False)
class Eval:
    """One marked test function: its workflow, dimensions, fixed inputs and threshold."""

    nodeid: str
    """The function's node id (the items' ids without their ``[...]``)."""
    workflow: Any
    dims: dict[str, tuple[str, ...]]
    """Dimension name -> the parametrized argument names whose ids key it."""
    inputs: dict[str, Any]
    threshold: float | None
    cluster: str | None = None
    """``cluster=`` on the marker: the case field whose values cluster the cases."""
    clusters: list[list[Any]] | None = None
    """``[[case key, label], ...]`` once collected (see ``_cells.cluster_labels``)."""
    items: list[pytest.Item] = dataclasses.field(default_factory=list)
    job: Any = None
    """The ``JobResult`` once the job ran."""
    error: BaseException | None = None
    """What stopped the job (a bad signature, a nondeterministic workflow)."""
    job_id: str | None = None
    started_job: str | None = None
    """The job this run launched or resumed, set before it runs (a Ctrl-C notice names it)."""
    index: dict[tuple[Any, ...], list[tuple[tuple[Any, ...], Any]]] | None = None
    """The output's cells by item, built once per job."""
    reported: bool = False
    """Whether this process already attached the eval's cells to an item report."""

    def release(self) -> None:
        """Let go of the job's results once every item has its slice (the session ends).

        The summary reads the job back from the store, so a large eval does not hold two
        copies of its invocations at the end of the run.
        """
        self.job = self.index = None  # job_id stays: run_job set it

    @property
    def root(self) -> str:
        """The root of every address of the eval's job: ``evals.test_qa::test_qa``."""
        path, _, function = self.nodeid.partition("::")
        module = path.removesuffix(".py").replace("/", ".").replace("\\", ".")
        return f"{module}::{function}"

    @property
    def argnames(self) -> list[str]:
        return [a for names in self.dims.values() for a in names]


def _function_nodeid(item: pytest.Item) -> str:
    return item.nodeid.split("[", 1)[0]


def _parametrize_argnames(item: pytest.Item) -> list[tuple[str, ...]]:
    groups = []
    for mark in item.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames")
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",") if n.strip()]
        groups.append(tuple(names or ()))
    return groups


def parse_marker(item: pytest.Item) -> Eval:
    """Read and validate an item's ``@pytest.mark.fxtr``.

    Raises:
        pytest.UsageError: naming the test, what is wrong and the fix.
    """
    from fxtr.experiment._definition import WorkflowDefinition

    mark = item.get_closest_marker(MARKER)
    assert mark is not None
    where = f"@pytest.mark.fxtr on {_function_nodeid(item)}"
    problems: list[str] = []
    if len(mark.args) != 1 or not isinstance(mark.args[0], WorkflowDefinition):
        problems.append(f"takes one positional argument, the @workflow to run, got {mark.args!r}")
    unknown = set(mark.kwargs) - {"dims", "inputs", "threshold", "cluster"}
    if unknown:
        problems.append(
            f"has unknown arguments {sorted(unknown)!r}; use dims=, inputs=, threshold=, cluster="
        )
    groups = _parametrize_argnames(item)
    argnames = [a for g in groups for a in g]
    if not argnames:
        problems.append(
            "needs a parametrized test: add @pytest.mark.parametrize(...) for the cases"
        )
    dims_raw = mark.kwargs.get("dims")
    dims: dict[str, tuple[str, ...]] = {}
    if dims_raw is None:
        dims = {"case": tuple(argnames)}
    elif not isinstance(dims_raw, dict):
        problems.append(
            f"dims= must be a dict of dimension name to argument name(s), got {dims_raw!r}"
        )
    else:
        for dim, names in dims_raw.items():
            names = (names,) if isinstance(names, str) else tuple(names)
            if not isinstance(dim, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", dim):
                problems.append(f"dimension name {dim!r} must be an identifier")
            for name in names:
                if name not in argnames:
                    problems.append(
                        f"dims[{dim!r}] names {name!r}, which is not a parametrized argument "
                        f"(those are {argnames!r})"
                    )
            dims[dim] = names
        listed = [a for names in dims.values() for a in names]
        for name in argnames:
            if listed.count(name) > 1:
                problems.append(f"argument {name!r} is in more than one dimension")
            elif name not in listed:
                problems.append(
                    f"parametrized argument {name!r} is in no dimension; add it to dims="
                )
    inputs = mark.kwargs.get("inputs") or {}
    if not isinstance(inputs, dict):
        problems.append(f"inputs= must be a dict of workflow input name to value, got {inputs!r}")
        inputs = {}
    threshold = mark.kwargs.get("threshold")
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, (int, float))
    ):
        problems.append(f"threshold= must be a number, got {threshold!r}")
    elif threshold is not None and not math.isfinite(threshold):
        problems.append(f"threshold= must be a finite number, got {threshold!r}")
    cluster = mark.kwargs.get("cluster")
    if cluster is not None and (not isinstance(cluster, str) or not cluster):
        problems.append(
            f"cluster= must name a case field (a Case.metadata key or a parametrized "
            f"argument), got {cluster!r}"
        )
    if not problems:
        problems.extend(_workflow_problems(mark.args[0], dims, inputs, argnames))
    if problems:
        raise pytest.UsageError(f"{where}: " + "; ".join(problems) + ".")
    return Eval(
        nodeid=_function_nodeid(item),
        workflow=mark.args[0],
        dims=dims,
        inputs=dict(inputs),
        threshold=None if threshold is None else float(threshold),
        cluster=cluster,
    )


def _workflow_problems(
    workflow: Any, dims: dict[str, tuple[str, ...]], inputs: dict[str, Any], argnames: list[str]
) -> list[str]:
    """What does not fit the workflow: unknown names, dimensions it does not declare."""
    import inspect

    params = workflow.signature.params
    problems = []
    for name in inputs:
        if name not in params:
            problems.append(
                f"inputs= names {name!r}, which workflow {workflow.name!r} does not take"
            )
        if name in argnames:
            problems.append(f"{name!r} is both parametrized and in inputs=; give it once")
    dim_of = {name: dim for dim, names in dims.items() for name in names}
    for name in argnames:
        param = params.get(name)
        if param is None:
            problems.append(
                f"parametrized argument {name!r} is not an input of workflow "
                f"{workflow.name!r} (its inputs: {sorted(params)!r}); rename it to one of "
                "them or remove it from the parametrization"
            )
        elif param.kind == "handle" and not param.dims:
            problems.append(
                f"parametrized argument {name!r} is a single value of workflow "
                f"{workflow.name!r} ({param.describe()}); give it in inputs= instead"
            )
        elif param.kind == "handle" and [d.name for d in param.dims] != [dim_of.get(name)]:
            declared = ", ".join(d.name for d in param.dims)
            problems.append(
                f"dims= puts {name!r} in dimension {dim_of.get(name)!r}, but workflow "
                f"{workflow.name!r} declares {param.describe()}; write dims={{{declared!r}: "
                f"{name!r}, ...}}"
            )
    defaults = inspect.signature(workflow.fn).parameters
    missing = [
        p
        for p in params
        if p not in inputs and p not in argnames and defaults[p].default is inspect.Parameter.empty
    ]
    if missing:
        problems.append(
            f"workflow {workflow.name!r} needs input(s) {missing!r}, which are neither "
            "parametrized nor in inputs="
        )
    return problems


_KEYS = pytest.StashKey[dict[str, str]]()


def item_keys(ev: Eval, item: pytest.Item) -> dict[str, str]:
    """The item's key in each dimension: the ids of the parametrize calls that feed it."""
    keys = item.stash.get(_KEYS, None)
    if keys is None:
        keys = item.stash[_KEYS] = _item_keys(ev, item)
    return keys


def _item_keys(ev: Eval, item: pytest.Item) -> dict[str, str]:
    callspec = getattr(item, "callspec", None)
    groups = _parametrize_argnames(item)
    ids = list(callspec._idlist) if callspec is not None else []
    if len(ids) != len(groups):
        msg = (
            f"{item.nodeid}: fxtr cannot tell which parametrize ids belong to which arguments "
            "(parametrization not made with @pytest.mark.parametrize, or hidden ids). "
            "Parametrize evals with @pytest.mark.parametrize and visible ids."
        )
        raise pytest.UsageError(msg)
    id_of = {name: ids[i] for i, names in enumerate(groups) for name in names}
    keys = {}
    for dim, names in ev.dims.items():
        parts: list[str] = []
        for name in names:
            if id_of[name] not in parts:
                parts.append(id_of[name])
        keys[dim] = "-".join(parts)
    return keys


def job_inputs(ev: Eval, samples: int | None = None) -> dict[str, Any]:
    """The job's inputs: an array per parametrized argument, and the marker's inputs.

    Each parametrized argument becomes an array over its dimension's keys; ``samples``
    (``--fxtr-samples``) replaces the value of a workflow input named ``samples``.
    """
    from fxtr import Array

    params = ev.workflow.signature.params
    values: dict[str, dict[str, Any]] = {}
    for item in ev.items:
        keys = item_keys(ev, item)
        for dim, names in ev.dims.items():
            for name in names:
                if name in params:
                    values.setdefault(name, {})[keys[dim]] = item.callspec.params[name]  # type: ignore[attr-defined]
    dim_of = {name: dim for dim, names in ev.dims.items() for name in names}
    inputs: dict[str, Any] = {}
    for name, mapping in values.items():
        inputs[name] = Array.from_mapping(mapping, dims=[(dim_of[name], str)])
    for name, value in ev.inputs.items():  # a project array's snapshot: its array
        inputs[name] = value.__fxtr_array__() if hasattr(type(value), "__fxtr_array__") else value
    if samples is not None and "samples" in params and "samples" not in dim_of:
        inputs["samples"] = samples
    return inputs


def job_id_for(run_id: str, ev: Eval) -> str:
    """One job per eval per run; xdist workers derive the same id from the shared run id."""
    return f"{run_id}-{hashlib.sha256(ev.nodeid.encode()).hexdigest()[:8]}"


def resume_key(ev: Eval, inputs: dict[str, Any]) -> str:
    """Where the store keeps the last job of an eval with these inputs."""
    from fxtr.experiment._job_inputs import input_fingerprint

    return f"pytest:{ev.nodeid}:{input_fingerprint(inputs)}"


def pytest_origin(ev: Eval) -> dict[str, Any] | None:
    """Where pytest imported the eval from: `fxtr resume` collects that file the same way."""
    if not ev.items:
        return None
    item = ev.items[0]
    config = item.config
    return {
        "kind": "pytest",
        "nodeid": ev.nodeid,
        "file": str(item.path),
        "rootdir": str(config.rootpath),
        "dir": str(config.invocation_params.dir),
    }


def run_job(
    ev: Eval,
    settings: Any,
    run_id: str,
    progress: Callable[[Any], None] | None,
    loop: SessionLoop,
) -> None:
    """Run (or resume) the eval's job; keep the result or the error on the eval.

    Called once per eval, by the setup of its first item (later items find ``ev.job`` or
    ``ev.error`` set). The eval's key points at the job before it starts, so a run
    interrupted with Ctrl-C is continued by ``--fxtr-resume`` as the job's next attempt.
    """
    from fxtr.experiment._jobs import launch, resume
    from fxtr.store import open_store

    try:
        inputs = job_inputs(ev, settings.samples)
        store = open_store(settings.store)
        key = resume_key(ev, inputs)
        options: dict[str, Any] = {
            "store": store,
            "conflict": settings.conflict,
            "cache_keep": settings.cache_keep,
            "verify": settings.verify,
            "concurrency": settings.concurrency,
            "on_invocation": progress,
            "executor": loop.executor_for(settings.executor),
            "run_tag": run_id,
        }
        last = store.get_last_job(key) if settings.resume else None
        if last is not None and store.has_job(last):
            ev.started_job = last  # known before it runs: an interrupted run still names it
            coro = resume(last, workflow=ev.workflow, **options)
        else:
            job_id = ev.started_job = job_id_for(run_id, ev)
            store.set_last_job(key, job_id)
            origin = pytest_origin(ev)
            coro = launch(
                ev.workflow, inputs, job_id=job_id, root=ev.root, origin=origin, **options
            )
        from pytest_fxtr._cost import within_cost_controls

        ev.job = loop.run(within_cost_controls(coro, settings, loop, store))
        ev.job_id = ev.job.job_id
        store.set_last_job(key, ev.job.job_id)
    except Exception as exc:
        ev.error = exc


class SessionLoop:
    """One event loop in a thread for the run's jobs, so an executor outlives one job."""

    def __init__(self) -> None:
        import asyncio
        import threading

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fxtr-jobs", daemon=True)
        self.thread.start()
        self.executor: Any = None

    def run(self, coro: Any) -> Any:
        """Run ``coro`` on the loop; on Ctrl-C, cancel it and let it record that first."""
        import asyncio
        import concurrent.futures

        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            try:
                future.result(timeout=10)
            except (concurrent.futures.CancelledError, concurrent.futures.TimeoutError):
                pass
            except Exception:  # the job's own error matters less than the interrupt
                pass
            raise

    def executor_for(self, url: str | None) -> Any:
        """The executor for ``--fxtr-executor`` (made once, on this loop)."""
        if not url:
            return None
        if self.executor is None:
            from fxtr.integrations.dask import DaskExecutor

            target = url.removeprefix("dask://")
            self.executor = DaskExecutor("local" if target == "local" else f"tcp://{target}")
            self.run(self.executor.start())
        return self.executor

    def close(self) -> None:
        if self.executor is not None:
            self.run(self.executor.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def slice_for(
    ev: Eval, item: pytest.Item
) -> tuple[Any, list[tuple[tuple[Any, ...], Any]], str | None]:
    """The item's slice of the output, its numeric cells for scoring, and why it fails (if).

    Returns:
        ``(value, cells, failure)``: the value the ``result`` fixture gives, the
        ``(full key, value)`` cells it covers, and a failure message or ``None``.
    """
    from fxtr import Array
    from fxtr.report._redaction import escape_controls

    keys = item_keys(ev, item)
    job = ev.job
    partial, missing = job.partial_output, job.missing
    if partial is None:
        return None, [], _job_failure(ev, keys)
    select = tuple(keys[d] for d in partial.dims if d in keys)
    cells = _cell_index(ev, partial, keys).get(select)
    if cells is None:
        return None, [], f"the output of job {job.job_id} has no cell for {keys!r}"
    gone = [(k, missing[k]) for k, _ in cells if k in missing]
    if gone:
        related = []
        for inv in job.invocations:
            if inv.status == "succeeded":
                continue
            inv_keys = address_keys(inv.address)
            if all(inv_keys.get(d, v) == v for d, v in keys.items()):
                related.append(inv)
        lines = [f"{len(gone)} of {len(cells)} output cell(s) for {keys} have no value."]
        for inv in sorted(
            related, key=lambda i: ("failed", "needs_review", "skipped").index(i.status)
        ):
            reason = f" [{inv.reason}]" if inv.reason else ""
            error = escape_controls(str(inv.error))  # one line: an error's text is not output
            lines.append(f"  {inv.status}{reason}: step {inv.step!r} at {inv.address}: {error}")
        if not related:
            lines.append(f"  cause: {gone[0][1]}")
        return None, [], "\n".join(lines)
    rest = [i for i, d in enumerate(partial.dims) if d not in keys]
    if not rest:
        return cells[0][1], cells, None
    dims = tuple(partial.dim_specs[i] for i in rest)
    sub = Array.from_cells(
        dims,
        [partial.keys(d.name) for d in dims],
        [v for _, v in cells],
        partial.value_type,
    )
    return sub, cells, None


def _cell_index(
    ev: Eval, partial: Any, keys: dict[str, str]
) -> dict[tuple[Any, ...], list[tuple[tuple[Any, ...], Any]]]:
    """The output's cells grouped by the keys of the dimensions items select (built once)."""
    if ev.index is None:
        pos = [i for i, d in enumerate(partial.dims) if d in keys]
        index: dict[tuple[Any, ...], list[tuple[tuple[Any, ...], Any]]] = {}
        for key, value in partial.items():
            index.setdefault(tuple(key[i] for i in pos), []).append((key, value))
        ev.index = index
    return ev.index


def _job_failure(ev: Eval, keys: dict[str, str]) -> str:
    job = ev.job
    failed = [w for w in job.workflows if w.status != "succeeded"]
    if failed:
        wf = failed[0]
        return f"workflow {wf.workflow!r} at {wf.address} {wf.status}: {wf.error}"
    return f"job {job.job_id} ended {job.status} with no output"


def numeric(value: Any) -> float | None:
    """A score value as a float, or ``None`` when it is not numeric.

    A value with a numeric ``value`` attribute (a kit ``Score``) counts as that number.
    """
    if type(value) is float:  # the common case first
        return value if math.isfinite(value) else None
    if not isinstance(value, (bool, int, float)) and hasattr(value, "value"):
        value = value.value
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


_PLAIN_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=([^,\[\]/]*)")


def address_keys(address: str) -> dict[str, str]:
    """Every map key along an address, unquoted (``a/b[k="x/y"]`` → ``{"k": "x/y"}``)."""
    if '"' not in address:  # no quoted key: the common case, at C speed
        return dict(_PLAIN_KEY.findall(address))
    from fxtr.tracing._jobgraph import address_segments, split_segment

    keys: dict[str, str] = {}
    for segment in address_segments(address):
        keys.update(split_segment(segment)[1])
    return keys
