"""The dry run's forecast against the real cost, over ten evals (DESIGN §14; target 20%).

Each eval is the kit's ``evaluate`` with its own mock subject (priced as a real model, with
answers whose length varies case by case with its own spread) and a mock judge. It runs
once on ``--cases`` cases (the history), then ``--fxtr-dry-run``'s planner forecasts a rerun
with as many new cases of the same kind, which then really runs. Prints each eval's
forecast, real cost and relative error, and their median (the baseline is the real cost
measured in the same run).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import tempfile

from fxtr import Array, launch
from fxtr.evals import Case, Model, evaluate, model_graded_fact, register_mock, user_text
from fxtr.evals._models import _register
from pytest_fxtr._dryrun import plan_job

PRICED = ["gpt-5-mini", "gpt-4o-mini", "claude-haiku-4-5", "gpt-4.1-mini", "gpt-5-nano"]


def _subject(i: int) -> Model:
    rng = random.Random(i)
    mean_words = rng.randint(5, 80)
    spread = rng.uniform(0.1, 0.6)

    def reply(request: object) -> str:
        text = user_text(request)  # type: ignore[arg-type]
        r = random.Random(text)
        words = max(1, round(r.gauss(mean_words, spread * mean_words)))
        return " ".join(["word"] * words)

    return register_mock(f"bench-subject-{i}", reply, price_as=PRICED[i % len(PRICED)])


def _judge(i: int) -> Model:
    def grade(request: object) -> str:
        return "The submission is fine.\nGRADE: C"

    return _register(f"bench-judge-{i}", grade, 0.0, PRICED[(i + 2) % len(PRICED)], __name__)


def _cases(start: int, n: int, i: int) -> Array[Case]:
    rng = random.Random(1000 * i + start)
    cases = {}
    for k in range(start, start + n):
        words = " ".join("lorem" for _ in range(rng.randint(5, 40)))
        cases[f"c{k}"] = Case(id=f"c{k}", input=f"Question {k}: {words}?", target="fine")
    return Array.from_mapping(cases, dims=["case"], value_type=Case)


async def _one(i: int, n: int, store: str) -> tuple[float, float]:
    model = _subject(i)
    scorer = model_graded_fact(_judge(i))
    models = Array.from_mapping({model.name: model}, dims=["model"], value_type=Model)

    def inputs(start: int) -> dict[str, object]:
        return {"model": models, "case": _cases(start, n, i), "scorer": scorer}

    await launch(evaluate, inputs(0), store=store, root=f"bench{i}", verify=False)
    plan = await plan_job(evaluate, inputs(n), store=store, root=f"bench{i}")
    real = await launch(evaluate, inputs(n), store=store, root=f"bench{i}", verify=False)
    spent = sum(inv.cost_usd or 0.0 for inv in real.invocations if not inv.from_cache)
    assert plan.total.invocations == sum(not inv.from_cache for inv in real.invocations)
    return plan.total.usd, spent


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--evals", type=int, default=10)
    args = parser.parse_args()
    errors = []
    print(f"{'eval':>4}  {'forecast':>10}  {'real':>10}  {'error':>7}")
    for i in range(args.evals):
        store = tempfile.mkdtemp(prefix="fxtr-bench-forecast-")
        try:
            forecast, real = await _one(i, args.cases, store)
        finally:
            shutil.rmtree(store, ignore_errors=True)
        error = abs(forecast - real) / real
        errors.append(error)
        print(f"{i:>4}  ${forecast:>9.5f}  ${real:>9.5f}  {error:>6.1%}")
    median = statistics.median(errors)
    print(
        f"median relative error of the forecast over {len(errors)} evals: {median:.1%} "
        f"(target within 20%: {'met' if median <= 0.20 else 'NOT met'})"
    )


if __name__ == "__main__":
    asyncio.run(main())
