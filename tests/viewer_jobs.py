"""A job for the viewer tests: a logged step, a failing step, and an XSS probe in a result."""

from __future__ import annotations

from typing import Annotated

from fxtr import Array, ArrayHandle, Entity, StepContext, WorkflowContext, run, step, workflow

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
