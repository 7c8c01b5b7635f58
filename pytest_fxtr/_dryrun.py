"""``--fxtr-dry-run``: what a run would do and cost, with nothing run, spent or written.

Each eval's job is planned by the engine itself, against a read-only view of the store (no
job, claim or entry is written) and with an executor that runs no step body. An invocation
the cache or the record serves is counted as cached. An invocation of a kit step
(``fxtr.generate``, ``fxtr.score``) that would run is forecast from the request it would
send, and answered with a placeholder of the right type so that the invocations after it are
planned too (their addresses do not depend on data). Any other step that would run is not
executed: it counts as one invocation, forecast from its history, and what depends on it is
reported as "at least".

The forecast of an invocation is the median recorded cost per invocation of that step and
model in the store's cache when there is one; else the tokens of its request (input
characters / 4; output the sampling's ``max_tokens``, else the model's median output in the
store, else 256) at the model's price. A model with no price is ``n/a``, never 0.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from typing import Any

DRY_MARK = "fxtr dry run: not executed"
"""The error of an invocation the dry run did not execute (and of what it skipped)."""


OWN = ("(steps of your own)", "-")
"""The row of invocations a dry run cannot forecast: steps it does not know, with no history."""


class NotExecuted(Exception):
    """Raised in place of a step body that a dry run does not run."""


@dataclasses.dataclass
class Call:
    """One model call an invocation would make."""

    model: str
    role: str
    usd: float | None
    input_tokens: int = 0
    output_tokens: int = 0


@dataclasses.dataclass
class Row:
    """Per eval, model and role: what would run and its forecast."""

    invocations: int = 0
    calls: int = 0
    usd: float = 0.0
    unpriced: int = 0
    at_least: bool = False

    def add(self, usd: float | None, calls: int, invocations: int = 1) -> None:
        self.invocations += invocations
        self.calls += calls
        if usd is None:
            self.unpriced += invocations
        else:
            self.usd += usd

    def money(self) -> str:
        if self.unpriced and not self.usd:
            return "n/a"
        text = f"${self.usd:.4f}"
        if self.unpriced:
            text += f" + n/a ({self.unpriced} unpriced)"
        return text


class History:
    """What the store's cache says each step and model cost, per invocation."""

    def __init__(self, store: Any) -> None:
        self.cost: dict[tuple[str, str], list[float]] = {}
        self.calls: dict[tuple[str, str], list[int]] = {}
        self.outputs: dict[str, list[float]] = {}
        self.steps: dict[str, list[tuple[float | None, int, str, str]]] = {}
        try:
            entries = store.iter_entries()
            for _address, entry in entries:
                if entry.damaged or not entry.usage:
                    continue
                self._add(entry.meta.get("step"), entry.usage)
        except Exception:  # a store that cannot list its entries has no history to offer
            return

    def _add(self, step: Any, usage: dict[str, Any]) -> None:
        if not isinstance(step, str):
            return
        roles = usage.get("by_role") or {}
        role = next(iter(roles), "subject") if len(roles) == 1 else "subject"
        for model, row in (usage.get("by_model") or {}).items():
            calls = int(row.get("calls") or 0)
            if not calls:
                continue
            if row.get("usd") is not None:
                self.cost.setdefault((step, model), []).append(float(row["usd"]))
            self.calls.setdefault((step, model), []).append(calls)
            self.outputs.setdefault(model, []).append(float(row.get("output_tokens") or 0) / calls)
            self.steps.setdefault(step, []).append((row.get("usd"), calls, model, role))

    def median_cost(self, step: str, model: str) -> float | None:
        seen = self.cost.get((step, model))
        return statistics.median(seen) if seen else None

    def median_output(self, model: str) -> float | None:
        seen = self.outputs.get(model)
        return statistics.median(seen) if seen else None

    def of_step(self, step: str) -> list[Call]:
        """The calls a typical invocation of ``step`` made, per model (its medians)."""
        rows = self.steps.get(step)
        if not rows:
            return []
        out = []
        for model, role in dict.fromkeys((m, r) for _, _, m, r in rows):
            calls = statistics.median(c for _, c, m, _ in rows if m == model)
            out.extend(
                Call(model, role, self.median_cost(step, model)) for _ in range(round(calls))
            )
        return out


Forecaster = Callable[[dict[str, Any], Any, History], tuple[list[Call], Any]]
"""``(kwargs, context, history) -> (calls, placeholder result)`` for a step a dry run plans."""

FORECASTERS: dict[str, Forecaster] = {}
"""Per step name, how a dry run forecasts an invocation of it without running it."""


def _call_for(step: str, model: Any, request: Any, role: str, history: History) -> Call:
    from fxtr.models._budget import estimate_call

    api = pricing_api(model)
    median = history.median_cost(step, model.model)
    tokens_in, tokens_out, usd = estimate_call(api, request, history.median_output(model.model))
    if usd is not None and median is None:
        from fxtr.models import _batch

        if _batch.settings_for(model.name, model.base_url, model.provider) is not None:
            usd *= _batch.BATCH_PRICE  # its calls go through the provider's batch API
    return Call(model.name, role, median if median is not None else usd, tokens_in, tokens_out)


def pricing_api(model: Any) -> Any:
    """What prices a kit ``Model``'s calls, without opening a client."""
    import types

    if model.provider == "mock":
        return model.api()  # a registered mock: no client behind it
    provider = "anthropic" if model.provider == "anthropic" else "openai"
    return types.SimpleNamespace(model_name=model.model, provider=provider, base_url=model.base_url)


def _generate(kwargs: dict[str, Any], context: Any, history: History) -> tuple[list[Call], Any]:
    from fxtr.evals._evaluate import case_prompt, request_for
    from fxtr.models import ContentText, ModelResponse, Usage

    model, case = kwargs["model"], kwargs["case"]
    request = request_for(model, case_prompt(case), context.sample)
    call = _call_for("fxtr.generate", model, request, "subject", history)
    placeholder = ModelResponse(
        output=(ContentText(text="x" * (4 * call.output_tokens)),),
        usage=Usage(input_tokens=call.input_tokens, output_tokens=call.output_tokens),
        cost=call.usd,
        model=model.model,
    )
    return [call], placeholder


def _score(kwargs: dict[str, Any], context: Any, history: History) -> tuple[list[Call], Any]:
    from fxtr.evals import _judge
    from fxtr.evals._evaluate import request_for
    from fxtr.evals._scorers import JUDGES, Score

    scorer, case, response = kwargs["scorer"], kwargs["case"], kwargs["response"]
    placeholder = Score(value=0.0, answer=None, explanation=DRY_MARK)
    if scorer.kind not in JUDGES or scorer.judge is None or not case.targets:
        return [], placeholder
    try:
        prompt = _judge.grading_prompt(
            scorer.template or "",
            question=case.input,
            answer=response.text,
            criterion="".join(case.targets),
            instructions=scorer.instructions or "",
            metadata=case.metadata,
        )
    except (KeyError, IndexError, ValueError):
        prompt = case.input + response.text
    request = request_for(scorer.judge, prompt, None)
    return [_call_for("fxtr.score", scorer.judge, request, "judge", history)], placeholder


FORECASTERS["fxtr.generate"] = _generate
FORECASTERS["fxtr.score"] = _score


class DryExecutor:
    """An executor that runs no step body: it forecasts, or declines."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.planned: dict[str, list[Call] | None] = {}
        """Per address that would run: its forecast calls (``None``: not forecastable)."""

    async def run(self, step: Any, context: Any, kwargs: dict[str, Any]) -> Any:
        forecaster = FORECASTERS.get(step.name)
        address = context.address
        if forecaster is None:
            self.planned[address] = None
            raise NotExecuted(DRY_MARK)
        calls, placeholder = forecaster(kwargs, context, self.history)
        self.planned[address] = calls
        return placeholder

    async def aclose(self) -> None:
        """Nothing to release."""


class ReadOnlyStore:
    """The store as a dry run sees it: every read goes through, no write lands."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.path = store.path
        self.closed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def claim(self, addresses: list[str], holder: str, lease: float) -> dict[str, str | None]:
        return dict.fromkeys(addresses)

    def get_entries(self, addresses: Any) -> Any:
        return self._store.get_entries(addresses)

    def _nothing(self, *args: Any, **kwargs: Any) -> None:
        return None

    write = renew = release = put_job = put_ops = put_workflows = set_last_job = _nothing
    put_trace_node = close = _nothing

    def update_job(self, job_id: str, **fields: Any) -> dict[str, Any]:
        return dict(self._store.get_job(job_id), **fields)


@dataclasses.dataclass
class Plan:
    """One eval's dry run."""

    eval: str
    rows: dict[tuple[str, str], Row]
    cached: int
    review: int
    at_least: bool
    error: str | None = None

    @property
    def total(self) -> Row:
        row = Row(at_least=self.at_least)
        for r in self.rows.values():
            row.invocations += r.invocations
            row.calls += r.calls
            row.usd += r.usd
            row.unpriced += r.unpriced
        return row


def plan_eval(ev: Any, settings: Any, loop: Any) -> Plan:
    """Plan one eval's job as the run would, executing and writing nothing."""
    from fxtr.store import open_store
    from pytest_fxtr._evals import job_inputs, resume_key

    try:
        inputs = job_inputs(ev, settings.samples)
        real = open_store(settings.store)
        last = real.get_last_job(resume_key(ev, inputs)) if settings.resume else None
        coro = plan_job(
            ev.workflow,
            inputs,
            store=real,
            root=ev.root,
            conflict=settings.conflict,
            concurrency=settings.concurrency,
            resume_job=last if last is not None and real.has_job(last) else None,
            name=ev.nodeid,
        )
        plan: Plan = loop.run(coro)
    except Exception as exc:
        return Plan(ev.nodeid, {}, 0, 0, False, f"{type(exc).__name__}: {exc}")
    return plan


async def plan_job(
    workflow: Any,
    inputs: dict[str, Any],
    *,
    store: Any,
    root: str | None = None,
    conflict: str = "review",
    concurrency: int = 32,
    resume_job: str | None = None,
    name: str | None = None,
) -> Plan:
    """Plan a job (or the next attempt of ``resume_job``) against ``store``; run nothing."""
    from fxtr.experiment._jobs import launch, resume
    from fxtr.store import open_store

    real = open_store(store)
    history = History(real)
    dry = DryExecutor(history)
    options: dict[str, Any] = {
        "store": ReadOnlyStore(real),
        "conflict": conflict,
        "verify": False,
        "concurrency": concurrency,
        "executor": dry,
        "hermetic": False,
    }
    if resume_job is not None:
        job = await resume(resume_job, workflow=workflow, **options)
    else:
        job = await launch(workflow, inputs, job_id="fxtr-dry-run", root=root, **options)
    return _tally(name or root or workflow.name, job, dry, history)


def _tally(nodeid: str, job: Any, dry: DryExecutor, history: History) -> Plan:
    rows: dict[tuple[str, str], Row] = {}
    cached = review = 0
    at_least = any(w.status == "skipped" and DRY_MARK in (w.error or "") for w in job.workflows)
    for inv in job.invocations:
        if inv.status == "succeeded" and inv.from_cache:
            cached += 1
            continue
        if inv.status == "needs_review":
            review += 1
            continue
        planned = dry.planned.get(inv.address, ...)
        depends = inv.status == "skipped" and DRY_MARK in (inv.error or "")
        if planned is ... and not depends:
            continue  # skipped for another reason (an input in review): it would not run
        if isinstance(planned, list):
            _add_calls(rows, planned)
            continue
        at_least = at_least or depends
        calls = history.of_step(inv.step)
        if not calls:
            rows.setdefault(OWN, Row()).add(None, 0)
            rows[OWN].at_least = True
            at_least = True
            continue
        _add_calls(rows, calls)
    return Plan(nodeid, rows, cached, review, at_least)


def _add_calls(rows: dict[tuple[str, str], Row], calls: list[Call]) -> None:
    if not calls:
        rows.setdefault(("(no model)", "-"), Row()).add(0.0, 0)
        return
    per: dict[tuple[str, str], list[Call]] = {}
    for c in calls:
        per.setdefault((c.model, c.role), []).append(c)
    for key, group in per.items():
        costs = [c.usd for c in group]
        usd = None if any(u is None for u in costs) else sum(u for u in costs if u is not None)
        rows.setdefault(key, Row()).add(usd, len(group))


def render(tr: Any, plans: list[Plan]) -> None:
    """Print the dry run: per eval, per model and role, what would run and cost."""
    from tabulate import tabulate

    tr.write_sep("=", "fxtr dry run")
    grand = Row()
    for plan in plans:
        tr.write_line("")
        if plan.error is not None:
            tr.write_line(f"{plan.eval}: cannot be planned: {plan.error}")
            continue
        total = plan.total
        prefix = "at least " if plan.at_least else ""
        tr.write_line(
            f"{plan.eval}: {prefix}{total.invocations} invocation(s) would run, "
            f"{prefix}{total.calls} model call(s), forecast {total.money()}"
            f" ({plan.cached} cached"
            + (f", {plan.review} awaiting review" if plan.review else "")
            + ")"
        )
        if plan.rows:
            table = [
                [
                    model,
                    role,
                    ("at least " if row.at_least else "") + str(row.invocations),
                    row.calls,
                    row.money(),
                ]
                for (model, role), row in sorted(plan.rows.items())
            ]
            tr.write_line(
                tabulate(table, headers=["model", "role", "invocations", "calls", "forecast"])
            )
        grand.at_least = grand.at_least or plan.at_least
        grand.invocations += total.invocations
        grand.calls += total.calls
        grand.usd += total.usd
        grand.unpriced += total.unpriced
    prefix = "at least " if grand.at_least else ""
    tr.write_line("")
    tr.write_line(
        f"dry run: {prefix}{grand.invocations} invocation(s), {prefix}{grand.calls} model "
        f"call(s), forecast {grand.money()}; nothing was run, spent or written"
    )


def plans_json(plans: list[Plan]) -> list[dict[str, Any]]:
    """The dry run as data (for tests and ``--fxtr-report``-like use)."""
    out = []
    for plan in plans:
        total = plan.total
        out.append(
            {
                "eval": plan.eval,
                "error": plan.error,
                "invocations": total.invocations,
                "calls": total.calls,
                "usd": None if total.unpriced and not total.usd else total.usd,
                "unpriced": total.unpriced,
                "cached": plan.cached,
                "review": plan.review,
                "at_least": plan.at_least,
                "by": [
                    {
                        "model": m,
                        "role": r,
                        "invocations": row.invocations,
                        "calls": row.calls,
                        "usd": None if row.unpriced and not row.usd else row.usd,
                    }
                    for (m, r), row in sorted(plan.rows.items())
                ],
            }
        )
    return out
