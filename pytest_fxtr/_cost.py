"""The run's cost controls around each eval's job: the budget and the adaptive limiters.

Every job of one pytest run shares one ``Budget`` (``--fxtr-max-cost``) and, per provider
base URL and model, one adaptive limiter starting at ``--fxtr-concurrency``. After each
job, its record keeps the limiters' histories and what the budget saw.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any


def budget_of(loop: Any, settings: Any, store: Any = None) -> Any:
    """The run's budget (one per session loop), or ``None`` without ``--fxtr-max-cost``.

    It forecasts a call with no ``max_tokens`` at its model's median output in this run,
    else in the store's history (DESIGN §14), else 256.
    """
    if settings.max_cost is None:
        return None
    budget = getattr(loop, "budget", None)
    if budget is None:
        from fxtr.models._budget import Budget
        from pytest_fxtr._forecast import History

        history = History(store) if store is not None else None
        outputs = {} if history is None else history.median_outputs()
        budget = loop.budget = Budget(settings.max_cost, known_outputs=outputs)
    return budget


async def within_cost_controls(
    coro: Coroutine[Any, Any, Any], settings: Any, loop: Any, store: Any
) -> Any:
    """Run a job's coroutine under the run's budget and limiters; record what they did."""
    from fxtr.models import _batch
    from fxtr.models._budget import current_budget
    from fxtr.models._limiter import limiters, start_limit

    budget = budget_of(loop, settings, store)
    budget_token = current_budget.set(budget)
    limit_token = start_limit.set(settings.concurrency)
    batching = None
    if settings.batch:
        batching = _batch.BatchSettings(
            size=settings.batch_size or _batch.BatchSettings.size,
            delay=_batch.BatchSettings.delay
            if settings.batch_delay is None
            else settings.batch_delay,
        )
    batch_token = _batch._run_default().set(batching)
    try:
        job = await coro
    finally:
        current_budget.reset(budget_token)
        start_limit.reset(limit_token)
        _batch._run_default().reset(batch_token)
    fields: dict[str, Any] = {}
    moved = {k: v.to_json() for k, v in limiters().items() if v.history}
    if moved:
        fields["limiters"] = moved
    if budget is not None:
        fields["budget"] = {
            "limit": budget.limit,
            "spent": budget.spent,
            "refused": budget.refused,
            "unpriced_calls": budget.unpriced,
        }
    if fields:
        try:
            store.update_job(job.job_id, **fields)
        except KeyError:  # pragma: no cover - the job was just written
            pass
    return job
