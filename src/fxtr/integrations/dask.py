"""``DaskExecutor``: step bodies run on a Dask cluster; the job stays one job.

The coordinator (the process that launched the job) keeps replay, the step cache, claims and
the record; only step bodies travel. A step travels as a reference (module, qualified name,
source hash) plus a cloudpickle of its function made by value, for steps defined where
workers cannot import them; inputs and results travel in fxtr's canonical encoding. Outcomes
come back as data, never as pickled exceptions: a step's exception returns with its type,
message and traceback (and any HTTP status, body or model-call failure it carried), so the
coordinator classifies it as usual.

fxtr keeps its own failure semantics: tasks are submitted with ``retries=0``, the local
cluster this module starts sets ``distributed.scheduler.allowed-failures`` to 0 (a task whose
worker died is not rerun behind fxtr's back; the invocation fails and ``resume`` reruns it),
and every await has a timeout, because a worker that cannot deserialize a task logs an error
while its future never resolves (dask/distributed#8607). Workers must run the same fxtr
version (checked when the executor starts).

Start a cluster for it::

    dask scheduler                                   # on one machine
    dask worker tcp://SCHEDULER:8786 --nthreads 64   # on each worker, with fxtr installed

An ``async def`` step holds a worker thread while it awaits, so give workers many threads
for I/O-bound steps (1,000 steps of 10 ms took 6.1 s on 2 threads and 1.34 s on 128 here).
``provider_limits={"openai": 50}`` caps concurrent model calls per provider across the
whole cluster with a ``distributed.Semaphore``, so N workers do not multiply a rate limit by N.
Hermeticity notices are not collected on workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import logging
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

try:
    import cloudpickle
    import dask
    import distributed
except ImportError as exc:  # pragma: no cover - exercised without the extra
    msg = (
        "fxtr.integrations.dask needs Dask's distributed, which is not installed. Install it "
        "with `pip install 'pytest-fxtr[dask]'`."
    )
    raise ImportError(msg) from exc

import fxtr
from fxtr.experiment import executors
from fxtr.experiment.entities import BoundID, Entity
from fxtr.experiment.errors import FxtrError
from fxtr.experiment.jobs import Invocation

if TYPE_CHECKING:
    from fxtr.experiment.steps import StepContext, StepDefinition

log = logging.getLogger("fxtr.dask")

__all__ = ["DaskExecutor", "RemoteStepError", "WorkerLostError"]


class RemoteStepError(Exception):
    """A step that raised on a worker: the original type, message and traceback.

    It carries the original's ``status_code``, ``body`` and ``failure`` when it had them, so
    ``fxtr.tracing.classify`` gives the same reason as for a local run.
    """

    def __init__(self, outcome: dict[str, Any]) -> None:
        super().__init__(f"{outcome['type']}: {outcome['message']}")
        self.remote_type = outcome["type"]
        self.remote_traceback = outcome.get("traceback")
        if outcome.get("status_code") is not None:
            self.status_code = outcome["status_code"]
        if outcome.get("body") is not None:
            self.body = outcome["body"]
        if outcome.get("failure") is not None:
            self.failure = executors.decode_value(outcome["failure"])


class WorkerLostError(FxtrError):
    """The worker running an invocation died or left; only that invocation is lost."""

    failure_category = "worker_lost"


# on the worker ---------------------------------------------------------------------------


class _RemoteContext:
    """The ``StepContext`` a step body gets on a worker: address, logs, entities."""

    def __init__(self, meta: dict[str, Any], invocation: Any) -> None:
        self.cache_key = self.address = meta["address"]
        self.step_name = meta["step"]
        self.attempt = meta["attempt"]
        self.job_id = meta["job_id"]
        self.sample = meta.get("sample")
        self._invocation = invocation
        self.entities: dict[str, str] = {}

    def log(self, message: str) -> None:
        self._invocation.logs.append(str(message))

    async def store(self, entity: Entity) -> Any:
        text = executors.encode_value(entity)
        ref = BoundID(executors.fingerprint_of_text(text), type(entity))
        self.entities[ref.id] = text
        return ref

    async def load(self, ref: Any) -> Any:
        msg = (
            f"Step {self.step_name!r} called context.load() on a worker; annotate the "
            "parameter with the entity type instead, so the coordinator loads it and sends it."
        )
        raise RuntimeError(msg)


_RESOLVED: dict[tuple[str, str, str], Any] = {}


def _resolve_function(ref: dict[str, Any], blob: bytes) -> Any:
    key = (ref["module"], ref["qualname"], ref["source_hash"])
    fn = _RESOLVED.get(key)
    if fn is None:
        fn = _RESOLVED[key] = _load_function(ref, blob)
    return fn


def _load_function(ref: dict[str, Any], blob: bytes) -> Any:
    try:
        obj: Any = importlib.import_module(ref["module"])
        for part in ref["qualname"].split("."):
            obj = getattr(obj, part)
        fn = getattr(obj, "fn", obj)
        if executors.source_hash(fn) == ref["source_hash"]:
            return fn
    except Exception:  # not importable here, or another version of it: use the pickle
        pass
    return cloudpickle.loads(blob)


def _limiter(limits: dict[str, int]) -> Any:
    """A per-provider semaphore shared by the cluster, used around each model call."""
    semaphores = {
        name: distributed.Semaphore(max_leases=n, name=f"fxtr-provider-{name}")
        for name, n in limits.items()
    }

    @contextlib.asynccontextmanager
    async def limit(provider: str) -> Any:
        sem = semaphores.get(provider)
        if sem is None:
            yield
            return
        await asyncio.to_thread(sem.acquire)
        try:
            yield
        finally:
            await asyncio.to_thread(sem.release)

    return limit


def run_on_worker(
    ref: dict[str, Any], blob: bytes, kwargs_text: str, meta: dict[str, Any]
) -> dict[str, Any]:
    """Run one step invocation on a worker thread; the outcome comes back as data."""
    invocation = Invocation(meta["address"], meta["step"])
    started = time.time()
    try:
        fn = _resolve_function(ref, blob)
        kwargs = executors.decode_value(kwargs_text)
        context = _RemoteContext(meta, invocation)

        async def body() -> Any:
            limiter = _limiter(meta["provider_limits"]) if meta["provider_limits"] else None
            with executors.recording_into(invocation), executors.limiting_model_calls(limiter):
                if meta["timeout"] is None:
                    return await fn(context, **kwargs)
                async with asyncio.timeout(meta["timeout"]):
                    return await fn(context, **kwargs)

        value = asyncio.run(body())
        result_text = executors.encode_value(value)
    except BaseException as exc:  # every outcome goes back as data
        failure = getattr(exc, "failure", None)
        return {
            "ok": False,
            "type": type(exc).__name__,
            "message": str(exc),
            "traceback": "".join(traceback.format_exception(exc)),
            **executors.failure_details(exc),
            "failure": executors.encode_value(failure) if failure is not None else None,
            "usage": _usage(invocation),
            "started": started,
        }
    return {
        "ok": True,
        "result": result_text,
        "entities": context.entities,
        "usage": _usage(invocation),
        "started": started,
        "ended": time.time(),
    }


def _usage(invocation: Any) -> dict[str, Any]:
    return {
        "logs": invocation.logs,
        "calls": invocation.calls,
        "input_tokens": invocation.input_tokens,
        "output_tokens": invocation.output_tokens,
        "cost_usd": invocation.cost_usd,
        "cost_by_model": invocation.cost_by_model,
        "cost_by_role": invocation.cost_by_role,
        "model_calls": invocation.model_calls,
    }


def _worker_version() -> str:
    return fxtr.__version__


# on the coordinator ----------------------------------------------------------------------


class DaskExecutor:
    """Run step bodies on a Dask cluster.

    Args:
        address: ``"local"`` for an in-process ``LocalCluster`` this executor starts and
            stops, a scheduler address (``"tcp://host:8786"``), or a ``distributed.Client``
            created with ``asynchronous=True``.
        n_workers: workers of the local cluster.
        threads_per_worker: threads per local worker; async steps hold one while they await.
        processes: whether local workers are processes (else threads of this process).
        timeout: seconds to wait for one invocation beyond its own ``timeout``; a worker
            that cannot deserialize a task never answers, so every wait ends.
        provider_limits: concurrent model calls per provider across the cluster.
    """

    def __init__(
        self,
        address: Any = "local",
        *,
        n_workers: int = 2,
        threads_per_worker: int = 64,
        processes: bool = False,
        timeout: float = 3600.0,
        provider_limits: dict[str, int] | None = None,
    ) -> None:
        self.address = address
        self.n_workers = n_workers
        self.threads_per_worker = threads_per_worker
        self.processes = processes
        self.timeout = timeout
        self.provider_limits = dict(provider_limits or {})
        self.client: Any = None
        self._cluster: Any = None
        self._owns_client = False
        self._blobs: dict[int, bytes] = {}
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"DaskExecutor({self.address!r})"

    async def start(self) -> None:
        """Connect (or start the local cluster) and check the workers' fxtr version.

        Raises:
            FxtrError: a worker runs another fxtr version.
        """
        async with self._lock:
            if self.client is not None:
                return
            with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
                if isinstance(self.address, distributed.Client):
                    self.client = self.address
                elif self.address == "local":
                    self._cluster = await distributed.LocalCluster(
                        n_workers=self.n_workers,
                        threads_per_worker=self.threads_per_worker,
                        processes=self.processes,
                        asynchronous=True,
                        dashboard_address=None,
                    )
                    self.client = await distributed.Client(self._cluster, asynchronous=True)
                    self._owns_client = True
                else:
                    self.client = await distributed.Client(self.address, asynchronous=True)
                    self._owns_client = True
            versions = await asyncio.wait_for(self.client.run(_worker_version), 60)
            wrong = {w: v for w, v in versions.items() if v != fxtr.__version__}
            if wrong:
                msg = (
                    f"Dask workers run another fxtr than this process ({fxtr.__version__}): "
                    f"{wrong}. Install the same version on every worker."
                )
                raise FxtrError(msg)

    def _blob(self, fn: Any) -> bytes:
        blob = self._blobs.get(id(fn))
        if blob is None:
            module = sys.modules.get(fn.__module__)
            registered = False
            if module is not None and module.__name__ not in ("builtins",):
                with contextlib.suppress(ValueError):
                    cloudpickle.register_pickle_by_value(module)
                    registered = True
            try:
                blob = self._blobs[id(fn)] = cloudpickle.dumps(fn)
            finally:
                if registered and module is not None:
                    cloudpickle.unregister_pickle_by_value(module)
        return blob

    async def run(
        self, step: StepDefinition[..., Any], context: StepContext, kwargs: dict[str, Any]
    ) -> Any:
        """Submit the invocation and wait for its outcome (within a timeout)."""
        if self.client is None:
            await self.start()
        invocation = executors.invocation_of(context)
        ref = {
            "module": step.fn.__module__,
            "qualname": step.fn.__qualname__,
            "source_hash": step.source_hash,
        }
        meta = {
            "address": invocation.address,
            "step": step.name,
            "attempt": context.attempt,
            "job_id": context.job_id,
            "sample": context.sample,
            "timeout": step.timeout,
            "provider_limits": self.provider_limits,
        }
        key = (
            "fxtr-"
            + hashlib.sha256(
                f"{invocation.address}\0{invocation.fingerprint}\0{time.time_ns()}".encode()
            ).hexdigest()[:24]
        )
        future = self.client.submit(
            run_on_worker,
            ref,
            self._blob(step.fn),
            executors.encode_value(kwargs),
            meta,
            key=key,
            pure=False,
            retries=0,
        )
        wait = self.timeout + (step.timeout or 0)
        try:
            outcome = await asyncio.wait_for(future, wait)
        except TimeoutError:
            future.cancel()
            msg = (
                f"no answer from the cluster for {invocation.address!r} within {wait:g} s (a "
                "worker that cannot load the step never answers: check that workers can "
                "import it or that its module can be pickled)"
            )
            raise TimeoutError(msg) from None
        except (asyncio.CancelledError, KeyboardInterrupt):
            future.cancel()
            raise
        except Exception as exc:  # KilledWorker, a closed connection: the worker is gone
            msg = (
                f"the worker running {invocation.address!r} was lost ({type(exc).__name__}: {exc})"
            )
            raise WorkerLostError(msg) from None
        usage = outcome.get("usage") or {}
        invocation.logs.extend(usage.get("logs", []))
        invocation.calls += usage.get("calls", 0)
        invocation.input_tokens += usage.get("input_tokens", 0)
        invocation.output_tokens += usage.get("output_tokens", 0)
        if usage.get("cost_usd") is not None:
            invocation.cost_usd = (invocation.cost_usd or 0.0) + usage["cost_usd"]
        for model, row in (usage.get("cost_by_model") or {}).items():
            invocation.cost_by_model[model] = row
        for role, row in (usage.get("cost_by_role") or {}).items():
            invocation.cost_by_role[role] = row
        invocation.model_calls.extend(usage.get("model_calls", []))
        if not outcome["ok"]:
            raise RemoteStepError(outcome)
        executors.keep_entities(context, outcome["entities"])
        return executors.decode_value(outcome["result"])

    async def aclose(self) -> None:
        """Close the client and the local cluster this executor started."""
        if self.client is not None and self._owns_client:
            await self.client.close()
        if self._cluster is not None:
            await self._cluster.close()
        self.client = self._cluster = None
