"""Jobs for the viewer and command tests: a logged, a failing and an XSS step; an eval job."""

from __future__ import annotations

import json
from typing import Annotated

from fxtr import (
    Array,
    ArrayHandle,
    Entity,
    ScalarHandle,
    StepContext,
    WorkflowContext,
    run,
    step,
    workflow,
)

XSS = '<script>alert("xss")</script><img src=x onerror=alert(1)>'


class Verdict(Entity):
    case: str
    text: str


@step(name="view.judge")
async def judge(context: StepContext, case: str) -> Verdict:
    context.log(f"judged {case}: looks fine")
    if case == "broken":
        raise ConnectionError("judge unreachable for broken")
    return Verdict(case=case, text=XSS if case == "xss" else "ok")


@workflow(name="view.evaluate")
async def evaluate(
    context: WorkflowContext, case: Annotated[ArrayHandle[str], "[case: str]"]
) -> Annotated[ArrayHandle[Verdict], "[case: str]"]:
    return context.run_step("judge", judge, {"case": case}, map_over=["case"])


def make_job(store):
    cases = Array.from_mapping({c: c for c in ("fine", "xss", "broken")}, dims=["case"])
    return run(evaluate, {"case": cases}, store=store)


# An eval job: models x cases x samples, a mock model per model, a score per sample ----------

from fxtr.models import (  # noqa: E402
    ContentText,
    MockModelAPI,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    Usage,
    UserMessage,
    cost_of,
)
from fxtr.tracing._recorder import call_role  # noqa: E402

EVAL_KEY = "evals/test_res.py::test_res"
"""The eval the test jobs belong to (``evaluation.eval``)."""


def right_answer(model: str, question: str, sample: int, variant: str) -> bool:
    """Whether the scripted model answers right: the pattern the tests check against."""
    if question.startswith("flaky"):
        return sample % 2 == 0
    if question.startswith("hard") and model == "small":
        return variant == "better"
    if question.startswith("regress") and variant == "better":
        return False
    return True


@step(name="res.answer")
async def answer(context: StepContext, model: str, question: str, sample: int, variant: str) -> str:
    if question.startswith("boom") and model == "small":
        raise ConnectionError(f"provider unreachable for {question!r}")
    good = right_answer(model, question, sample, variant)
    text = f"{'RIGHT' if good else 'WRONG'}: {question}"
    api = MockModelAPI(model if model != "large" else "gpt-4o-mini", text, price_as="gpt-4o-mini")
    request = ModelRequest(context=(UserMessage(content=(ContentText(text=question),)),))
    return (await api.generate(request)).text


JUDGE_USAGE = {"input_tokens": 40, "output_tokens": 1, "cached_input_tokens": 32}
"""The judge's usage per call: its long instructions come from the provider's prompt cache."""


def judge_reply(request: ModelRequest) -> ModelResponse:
    """The scripted judge: RIGHT or WRONG, with prompt-cache usage as a real provider says."""
    answer = request.context[-1].content[0].text  # type: ignore[union-attr]
    usage = Usage(**JUDGE_USAGE)
    verdict = "RIGHT" if answer.startswith("RIGHT") else "WRONG"
    return ModelResponse(output=(ContentText(text=verdict),), usage=usage,
                         cost=cost_of("gpt-4o-mini", usage), model="judge-mini")  # fmt: skip


@step(name="res.score")
async def score(context: StepContext, answer: str) -> float:
    """Ask the judge (its call recorded with the role ``judge``, as the kit's scorer does)."""
    judge_api = MockModelAPI("judge-mini", judge_reply)
    request = ModelRequest(
        context=(
            SystemMessage(content=(ContentText(text="Reply RIGHT or WRONG."),)),
            UserMessage(content=(ContentText(text=answer),)),
        )
    )
    token = call_role.set("judge")
    try:
        verdict = (await judge_api.generate(request)).text
    finally:
        call_role.reset(token)
    return 1.0 if verdict == "RIGHT" else 0.0


@workflow(name="res.evaluate")
async def evaluate_eval(
    context: WorkflowContext,
    model: Annotated[ArrayHandle[str], "[model: str]"],
    case: Annotated[ArrayHandle[str], "[case: str]"],
    sample: Annotated[ArrayHandle[int], "[sample: int]"],
    variant: ScalarHandle[str],
) -> Annotated[ArrayHandle[float], "[model: str, case: str, sample: int]"]:
    inputs = {"model": model, "question": case, "sample": sample, "variant": variant}
    answers = context.run_step("answer", answer, inputs, map_over=["model", "case", "sample"])
    return context.run_step(
        "score", score, {"answer": answers}, map_over=["model", "case", "sample"]
    )


def eval_cases(n: int = 0, regressions: int = 0) -> dict[str, str]:
    """Case ids and questions: the named ones, ``regressions`` more that the better variant
    gets wrong, then ``n`` plain ones."""
    cases = {
        "easy": "easy: capital of France",
        "flaky": "flaky: a coin toss",
        "hard": "hard: prove it",
        "regress": "regress: an old favourite",
        "boom": "boom: the provider fails",
        "xss": "xss: " + XSS,
    }
    cases.update({f"regress{i}": f"regress: question {i}" for i in range(regressions)})
    cases.update({f"c{i:05d}": f"plain question {i}" for i in range(n)})
    return cases


def make_eval_job(
    store,
    *,
    variant: str = "base",
    samples: int = 2,
    n: int = 0,
    regressions: int = 0,
    models: tuple[str, ...] = ("small", "large"),
    threshold: float = 0.8,
    baseline: str | None = None,
):
    """Run the eval workflow for real and write its ``evaluation`` field as the plugin does."""
    cases = eval_cases(n, regressions)
    inputs = {
        "model": Array.from_mapping({m: m for m in models}, dims=["model"], value_type=str),
        "case": Array.from_mapping(cases, dims=["case"], value_type=str),
        "sample": Array.from_mapping(
            {s: s for s in range(samples)}, dims=["sample"], value_type=int
        ),
        "variant": variant,
    }
    result = run(
        evaluate_eval, inputs, store=store, conflict="overwrite", verify=False, hermetic=False
    )
    write_evaluation(store, result, models, list(cases), samples, threshold, baseline)
    return result


def _address(step_name: str, model: str, case: str, sample: int) -> str:
    return f"res.evaluate/{step_name}[model={model},case={case},sample={sample}]"


def write_evaluation(store, result, models, cases, samples, threshold, baseline):
    """The record's ``evaluation`` field (``docs/results.md``), built from the job's invocations."""
    by_address = {inv.address: inv for inv in result.invocations}
    cells, groups, failed = [], [], []
    for model in models:
        means = []
        missing = 0
        for case in cases:
            values = []
            addresses = []
            for s in range(samples):
                for name in ("answer", "score"):
                    if _address(name, model, case, s) in by_address:
                        addresses.append(_address(name, model, case, s))
                inv = by_address.get(_address("score", model, case, s))
                ok = inv is not None and inv.status == "succeeded"
                values.append(float(json.loads(inv.result_text)) if ok else None)
            status = "ok" if all(v is not None for v in values) else "missing"
            cells.append(
                {
                    "group": {"model": model},
                    "case": {"case": case},
                    "values": values,
                    "status": status,
                    "addresses": addresses,
                }
            )
            present = [v for v in values if v is not None]
            if status == "missing":
                missing += 1
            elif present:
                means.append(sum(present) / len(present))
        mean = sum(means) / len(means) if means else None
        passed = mean is not None and mean >= threshold and not missing
        groups.append(
            {
                "group": {"model": model},
                "mean": mean,
                "n": len(means),
                "missing": missing,
                "threshold": threshold,
                "passed": passed,
            }
        )
        if not passed:
            failed.append(f"model={model}")
    evaluation = {
        "eval": EVAL_KEY,
        "workflow": "res.evaluate",
        "case_dims": ["case"],
        "group_dims": ["model"],
        "sample_dim": "sample",
        "cells": cells,
        "groups": groups,
        "gate": {"passed": not failed, "failed": failed, "regressed": []},
        "baseline": {"job_id": baseline, "source": "store"} if baseline else None,
    }
    if hasattr(store, "update_job"):
        store.update_job(result.job_id, evaluation=evaluation)
    else:
        record = store.get_job(result.job_id)
        record["evaluation"] = evaluation
        store.put_job(record)


# A job whose names are longer than a graph node ---------------------------------------------


@step(name="views.a_step_whose_name_is_far_too_long_for_any_graph_node_to_hold")
async def long_named(context: StepContext, x: int) -> int:
    return x


@workflow(name="evals.test_a_module_with_a_long_name::test_an_eval_with_a_long_name_too")
async def long_workflow(
    context: WorkflowContext, x: Annotated[ArrayHandle[int], "[x: int]"]
) -> Annotated[ArrayHandle[int], "[x: int]"]:
    first = context.run_step(
        "the_first_operation_with_an_equally_long_name", long_named, {"x": x}, map_over=["x"]
    )
    return context.run_step(
        "second_operation_reading_the_first_one_and_its_parameter",
        long_named,
        {"x": first},
        map_over=["x"],
    )


def make_long_job(store):
    xs = Array.from_mapping({i: i for i in range(3)}, dims=["x"], value_type=int)
    return run(long_workflow, {"x": xs}, store=store, verify=False, hermetic=False)


# Keys with address syntax under a child workflow: the key sits mid-address -----------------

HOSTILE_KEYS = ["a/b", "br[ack]et", 'quo"te', "x]/y[z=1", "k=v,w"]
"""Map keys that hold address syntax (the engine writes them as JSON text)."""


@step(name="view.work")
async def work(context: StepContext, key: str) -> str:
    raise RuntimeError(f"failed on purpose for key {key}")


@workflow(name="view.inner")
async def inner(context: WorkflowContext, key: ScalarHandle[str]) -> ScalarHandle[str]:
    return context.run_step("work", work, {"key": key})


@workflow(name="view.outer")
async def outer(
    context: WorkflowContext, keys: Annotated[ArrayHandle[str], "[case: str]"]
) -> Annotated[ArrayHandle[str], "[case: str]"]:
    """One child workflow per key: addresses ``view.outer/inner[case="a/b"]/work``."""
    return context.run_child_workflow("inner", inner, {"key": keys}, map_over=["case"])


def make_hostile_job(store):
    keys = Array.from_mapping({k: k for k in HOSTILE_KEYS}, dims=["case"], value_type=str)
    return run(outer, {"keys": keys}, store=store)
