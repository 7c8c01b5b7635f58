"""Jobs whose steps call models (shared by the tracing and plugin tests)."""

from __future__ import annotations

from fxtr import ScalarHandle, StepContext, WorkflowContext, run, step, workflow
from fxtr.models import ContentText, MockModelAPI, ModelRequest, UserMessage
from fxtr.tracing import Client

API = MockModelAPI("gpt-4o-mini", "a fine answer")


@step(name="t.chat")
async def chat(context: StepContext, question: str) -> str:
    request = ModelRequest(context=(UserMessage(content=(ContentText(text=question),)),))
    return (await API.generate(request)).text


@workflow(name="t.chat_wf")
async def chat_wf(context: WorkflowContext, question: ScalarHandle[str]) -> ScalarHandle[str]:
    return context.run_step("chat", chat, {"question": question})


def chat_job():
    return run(chat_wf, {"question": "why is the sky blue?"})


@step(name="t.client")
async def with_client(context: StepContext, question: str) -> str:
    client = Client({"m": MockModelAPI("gpt-4o-mini", "yes")})
    with client.task("inner"):
        first = await client.messages.create(messages=[{"role": "user", "content": question}])
        second = await client.messages.create(messages=[{"role": "user", "content": first.text}])
    return second.text


@workflow(name="t.client_wf")
async def client_wf(context: WorkflowContext, question: ScalarHandle[str]) -> ScalarHandle[str]:
    return context.run_step("c", with_client, {"question": question})


def client_job():
    return run(client_wf, {"question": "ok?"})
