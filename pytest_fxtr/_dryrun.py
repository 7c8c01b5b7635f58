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
import textwrap
from typing import Any

from pytest_fxtr._forecast import (
    AGENT_STEPS,
    DRY_MARK,
    FORECASTERS,
    TURN,
    Call,
    History,
    NotExecuted,
)

__all__ = ["DRY_MARK", "Call", "History", "NotExecuted", "Plan", "plan_eval", "plan_job"]

OWN = ("(steps of your own)", "-")
"""The row of invocations a dry run cannot forecast: steps it does not know, with no history."""


@dataclasses.dataclass
class Row:
    """Per eval, model and role: what would run and its forecast."""

    invocations: int = 0
    calls: int = 0
    usd: float = 0.0
    unpriced: int = 0
    at_least: bool = False
    input_tokens: float = 0.0
    output_tokens: float = 0.0
    assumed: int = 0
    """Calls whose output tokens are the default guess (``DEFAULT_OUTPUT_TOKENS``)."""

    def add(self, usd: float | None, calls: int, invocations: int = 1) -> None:
        self.invocations += invocations
        self.calls += calls
        if usd is None:
            self.unpriced += invocations
        else:
            self.usd += usd

    def merge(self, other: Row) -> None:
        """Add another row's figures to this one's."""
        self.at_least = self.at_least or other.at_least
        self.invocations += other.invocations
        self.calls += other.calls
        self.usd += other.usd
        self.unpriced += other.unpriced
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.assumed += other.assumed

    def money(self) -> str:
        if self.unpriced and not self.usd:
            return "n/a"
        text = f"${self.usd:.4f}"
        if self.unpriced:
            text += f" + n/a ({self.unpriced} unpriced)"
        return text


class DryExecutor:
    """An executor that runs no step body: it forecasts, or declines."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.planned: dict[str, list[Call] | None] = {}
        """Per address that would run: its forecast calls (``None``: not forecastable)."""

    async def run(self, step: Any, context: Any, kwargs: dict[str, Any]) -> Any:
        from fxtr.experiment.entities import BoundID

        forecaster = FORECASTERS.get(step.name)
        address = context.address
        if forecaster is None:
            self.planned[address] = None
            raise NotExecuted(DRY_MARK)
        loaded = {
            k: await context.load(v) if isinstance(v, BoundID) else v for k, v in kwargs.items()
        }
        try:
            calls, placeholder = forecaster(loaded, context, self.history)
        except NotExecuted:
            self.planned[address] = None
            raise
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
        row = Row()
        for r in self.rows.values():
            row.merge(r)
        row.at_least = self.at_least
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
    trajectories: dict[str, tuple[Call, dict[str, int]]] = {}
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
            if inv.step in AGENT_STEPS:
                where = inv.address.rpartition("/")[0]
                turn, counts = trajectories.setdefault(where, (planned[0], {}))
                if inv.step == TURN:
                    trajectories[where] = (planned[0], counts)
                counts[inv.step] = counts.get(inv.step, 0) + 1
            continue
        at_least = at_least or depends
        calls = history.of_step(inv.step)
        if not calls:
            rows.setdefault(OWN, Row()).add(None, 0)
            rows[OWN].at_least = True
            at_least = True
            continue
        _add_calls(rows, calls)
    for turn, counts in trajectories.values():
        at_least = _more_turns(rows, turn, counts, history) or at_least
    return Plan(nodeid, rows, cached, review, at_least)


def _more_turns(
    rows: dict[tuple[str, str], Row], turn: Call, counts: dict[str, int], history: History
) -> bool:
    """Add the turns a trajectory takes after its first, from history; True: unknown.

    A trajectory's planned steps end at its first turn (the dry run's reply ends it); with
    trajectories of the model in history, each agent step is topped up to its median count
    there, each call forecast from its history (``call_for``), so that the forecast is the
    median turns times the cost of a turn (DESIGN §14).
    """
    medians = history.median_steps(turn.history_name)
    if medians is None:
        rows[(turn.model, turn.role)].at_least = True
        return True
    for step, median in medians.items():
        more = round(median) - counts.get(step, 0)
        if more <= 0:
            continue
        typical: Call | None = turn  # the planned turn: the model's trajectories' average
        if step != TURN:  # a tool call (no model call) or the simulated user's turn
            typical = next(iter(history.of_step(step)), None)
        for _ in range(more):
            _add_calls(rows, [typical] if typical is not None else [])
    return False


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
        row = rows.setdefault(key, Row())
        row.add(usd, len(group))
        row.input_tokens += sum(c.input_tokens for c in group)
        row.output_tokens += sum(c.output_tokens for c in group)
        row.assumed += sum(c.assumed for c in group)


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
                    round(row.input_tokens),
                    f"{round(row.output_tokens)}{'*' if row.assumed else ''}",
                    row.money(),
                ]
                for (model, role), row in sorted(plan.rows.items())
            ]
            headers = ["model", "role", "invocations", "calls", "in tokens", "out tokens"]
            tr.write_line(
                tabulate(
                    table,
                    headers=[*headers, "forecast"],
                    colalign=("left", "left", *("right",) * 5),
                )
            )
        grand.merge(total)
    prefix = "at least " if grand.at_least else ""
    tr.write_line("")
    tr.write_line(
        f"dry run: {prefix}{grand.invocations} invocation(s), {prefix}{grand.calls} model "
        f"call(s), forecast {grand.money()}; nothing was run, spent or written"
    )
    if grand.assumed:
        from fxtr.models._budget import DEFAULT_OUTPUT_TOKENS

        note = (
            f"* {grand.assumed} call(s) of models with no history in the store and no "
            f"max_tokens are forecast at {DEFAULT_OUTPUT_TOKENS} output tokens each, a guess "
            "that can be far off: after a first run (or with Sampling(max_tokens=...)) the "
            "forecast comes from what the model answered."
        )
        for line in textwrap.wrap(note, width=100, subsequent_indent="  "):
            tr.write_line(line)


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
                "input_tokens": round(total.input_tokens),
                "output_tokens": round(total.output_tokens),
                "assumed_output_calls": total.assumed,
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
                        "input_tokens": round(row.input_tokens),
                        "output_tokens": round(row.output_tokens),
                        "assumed_output_calls": row.assumed,
                        "usd": None if row.unpriced and not row.usd else row.usd,
                    }
                    for (m, r), row in sorted(plan.rows.items())
                ],
            }
        )
    return out
