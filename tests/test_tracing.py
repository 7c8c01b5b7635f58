"""The execution graph: parenting, reasons, stall, resume, persistence across processes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import respx

from fxtr import run
from fxtr.models import MockModelAPI, ModelCallError, OpenAIChatAPI
from fxtr.tracing import Client, FluxRecoveryNotInstalled, NodeNotResumableWarning
from tests import examples
from tests.examples import evaluate, qa_inputs

KEY = "sk-proj-TRACINGSECRETKEY987654"
CHAT_OK = {
    "id": "c",
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Acme, Globex, Initech."},
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 8},
}


async def research(client):
    """The seed's example, as written."""
    with client.task("market-research") as t:
        await client.messages.create(
            model="auto",
            messages=[{"role": "user", "content": "Who are the top 3 competitors?"}],
        )

        try:
            with client.step("fetch-pricing"):
                raise TimeoutError("pricing API timed out")
        except TimeoutError:
            pass  # a step can fail without killing the whole task

    # Re-runs only the failed step, with a rebuilt minimal context, not a
    # replay of the whole transcript. The retry lands in the same graph,
    # linked to the node it replaces via depends_on.
    response = await client.resume(t.task_id)

    return client.get_task_graph(t.task_id), response


def test_seed_research_example():
    """The model call and the failed fetch-pricing step are under the task, with reasons."""

    async def go():
        with respx.mock() as mock:
            mock.post("https://api.openai.com/v1/chat/completions").respond(200, json=CHAT_OK)
            api = OpenAIChatAPI("gpt-4o-mini", api_key=KEY)
            client = Client({"gpt-4o-mini": api})
            try:
                with pytest.warns(
                    NodeNotResumableWarning, match="'fetch-pricing'.*cannot be re-entered"
                ):
                    return await research(client)
            finally:
                await api.aclose()

    graph, response = asyncio.run(go())
    assert response is None
    task, call, fetch = graph.nodes
    assert (task.kind, task.name, task.status) == ("task", "market-research", "succeeded")
    assert (call.kind, call.name, call.parent_id, call.status) == (
        "model_call",
        "gpt-4o-mini",
        task.id,
        "succeeded",
    )
    assert (call.input_tokens, call.output_tokens) == (12, 8)
    assert call.cost_usd == pytest.approx((12 * 0.15 + 8 * 0.6) / 1e6)
    assert (fetch.kind, fetch.name, fetch.parent_id, fetch.status) == (
        "step",
        "fetch-pricing",
        task.id,
        "failed",
    )
    assert fetch.reason == "tool_error"
    assert fetch.error == "TimeoutError: pricing API timed out"
    assert graph.rollup(task.id)["cost_usd"] == pytest.approx(call.cost_usd)


def test_retired_model_is_resent_exactly_once_to_the_replacement():
    """One call fails on a retired model id; resume(model=...) re-sends exactly that request."""

    async def go():
        with respx.mock() as mock:
            retired = mock.post("http://old.test/v1/chat/completions").respond(
                404,
                json={
                    "error": {
                        "message": "The model `gpt-4-0314` has been deprecated",
                        "code": "model_not_found",
                    }
                },
            )
            new = mock.post("http://new.test/v1/chat/completions").respond(200, json=CHAT_OK)
            models = {
                "old": OpenAIChatAPI("gpt-4-0314", base_url="http://old.test/v1", api_key=KEY),
                "new": OpenAIChatAPI("gpt-4o-mini", base_url="http://new.test/v1", api_key=KEY),
            }
            client = Client(models)
            with client.task("brain") as t:
                await client.messages.create(
                    model="new", messages=[{"role": "user", "content": "first"}]
                )
                with pytest.raises(ModelCallError):
                    await client.messages.create(
                        model="old", messages=[{"role": "user", "content": "second"}]
                    )
                await client.messages.create(
                    model="new", messages=[{"role": "user", "content": "third"}]
                )
            sent_before = new.call_count
            response = await client.resume(t.task_id, model="new")
            for api in models.values():
                await api.aclose()
            return client.get_task_graph(t.task_id), response, retired, new, sent_before

    graph, response, retired, new, sent_before = asyncio.run(go())
    assert response.text == "Acme, Globex, Initech."
    assert retired.call_count == 1
    assert new.call_count == sent_before + 1
    resent = json.loads(new.calls.last.request.content)
    assert resent["messages"] == [{"role": "user", "content": "second"}]
    failed = graph.find(status="failed")[0]
    retry = graph.nodes[-1]
    assert failed.reason == "unknown" and failed.category == "not_found"
    assert retry.depends_on == [failed.id] and retry.parent_id == failed.parent_id
    assert retry.name == "gpt-4o-mini" and retry.status == "succeeded"


def test_parenting_across_gather_create_task_to_thread_and_nesting():
    """Nodes made in gathered coroutines, tasks, threads and nested steps find their parents."""
    client = Client({"m": MockModelAPI("gpt-4o-mini", "ok")})

    def in_thread():
        with client.step("threaded"):
            return 1

    async def leaf(name):
        with client.step(name):
            await client.messages.create(messages=[{"role": "user", "content": name}])

    async def go():
        with client.task("t") as t:
            with client.step("outer"):
                await asyncio.gather(leaf("g1"), leaf("g2"))
                await asyncio.create_task(leaf("created"))
                await asyncio.to_thread(in_thread)
        return client.get_task_graph(t.task_id)

    graph = asyncio.run(go())
    outer = graph.find(name="outer")[0]
    assert {n.name for n in graph.children(outer.id)} == {"g1", "g2", "created", "threaded"}
    for name in ("g1", "g2", "created"):
        step = graph.find(name=name)[0]
        (call,) = graph.children(step.id)
        assert call.kind == "model_call"
    assert graph.rollup(outer.id)["calls"] == 3


def test_stall_is_the_third_consecutive_failed_same_name_sibling():
    """Two failures keep their reasons; the third and later are stall; a success breaks it."""
    client = Client({"m": MockModelAPI("m", "x")})

    def attempt(ok):
        if not ok:
            raise ValueError("nope")

    with client.task("loop") as t:
        for ok in (False, False, False, False, True, False, False, False):
            try:
                client.step("retry", attempt, ok)
            except ValueError:
                pass
        try:
            client.step("other", attempt, False)
        except ValueError:
            pass
    reasons = [n.reason for n in client.get_task_graph(t.task_id).nodes[1:]]
    assert reasons == [
        "tool_error",
        "tool_error",
        "stall",
        "stall",
        None,
        "tool_error",
        "tool_error",
        "stall",
        "tool_error",
    ]


def test_callable_step_is_resumed_from_its_recorded_arguments():
    """A failed callable step re-runs with the same arguments, linked by depends_on."""
    calls = []

    def flaky(x, *, y):
        calls.append((x, y))
        if len(calls) == 1:
            raise ConnectionError("down")
        return x + y

    client = Client({"m": MockModelAPI("m", "x")})
    with client.task("t") as t:
        with pytest.raises(ConnectionError):
            client.step("add", flaky, 1, y=2)
    assert asyncio.run(client.resume(t.task_id)) == 3
    assert calls == [(1, 2), (1, 2)]
    graph = client.get_task_graph(t.task_id)
    assert graph.nodes[-1].depends_on == [graph.nodes[1].id]
    assert asyncio.run(client.resume(t.task_id)) is None


def test_resume_without_store_in_another_process_is_not_installed():
    """No store and a task this process does not hold: FluxRecoveryNotInstalled, not KeyError."""
    client = Client({"m": MockModelAPI("m", "x")})
    with pytest.raises(FluxRecoveryNotInstalled) as info:
        asyncio.run(client.resume("nope"))
    assert not isinstance(info.value, KeyError)
    with pytest.raises(KeyError):
        client.get_task_graph("nope")


def test_store_without_the_task_is_a_key_error(tmp_path):
    """A store that lacks the task raises KeyError."""
    client = Client({"m": MockModelAPI("m", "x")}, store=tmp_path)
    with pytest.raises(KeyError, match="No task 'nope' in the store"):
        asyncio.run(client.resume("nope"))


RECOVER_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from fxtr.models import MockModelAPI, ModelCallFailure
    from fxtr.tracing import Client

    def reply(request):
        return ModelCallFailure(category="rate_limit", description="429 slow down")

    client = Client({"flaky": MockModelAPI("gpt-4o-mini", reply)}, store=sys.argv[1])

    async def main():
        with client.task("recover-me") as t:
            try:
                await client.messages.create(messages=[{"role": "user", "content": "hello"}])
            except Exception:
                pass
        print(t.task_id)

    asyncio.run(main())
    """
)


def test_recovery_in_a_second_real_process(tmp_path):
    """A task recorded by one process is read and resumed by another, offline."""
    script = tmp_path / "first.py"
    script.write_text(RECOVER_SCRIPT)
    store = tmp_path / "store"
    out = subprocess.run(
        [sys.executable, str(script), str(store)],
        capture_output=True,
        text=True,
        check=True,
        env={"OPENAI_API_KEY": KEY, "PATH": "/usr/bin"},
    )
    task_id = out.stdout.strip()
    client = Client({"flaky": MockModelAPI("gpt-4o-mini", "recovered")}, store=store)
    graph = client.get_task_graph(task_id)
    assert [n.kind for n in graph.nodes] == ["task", "model_call"]
    assert graph.nodes[1].reason == "budget" and graph.nodes[1].category == "rate_limit"
    response = asyncio.run(client.resume(task_id))
    assert response.text == "recovered"
    again = Client({"flaky": MockModelAPI("gpt-4o-mini", "x")}, store=store).get_task_graph(task_id)
    assert again.nodes[-1].depends_on == [graph.nodes[1].id]
    for path in Path(store).rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes()


def test_job_graph_has_workflows_steps_edges_and_model_calls():
    """JobResult.graph: the job, its workflows, step invocations with depends_on and reasons."""
    examples.FAIL.clear()
    examples.FAIL.add("capital of france")
    try:
        result = run(evaluate, qa_inputs(models=("a",)))
    finally:
        examples.FAIL.clear()
    graph = result.graph
    kinds = [n.kind for n in graph.nodes]
    assert kinds[0] == "task" and kinds.count("workflow") == 2 and kinds.count("step") == 5
    score = graph.node("qa.evaluate/score[model=a,prompt=p1]")
    assert score.depends_on == ["qa.evaluate/answer[model=a,prompt=p1]"]
    assert score.parent_id == "qa.evaluate"
    mean = graph.node("qa.evaluate/summarize[model=a]/mean")
    assert mean.parent_id == "qa.evaluate/summarize[model=a]"
    failed = graph.node("qa.evaluate/answer[model=a,prompt=p2]")
    assert failed.status == "failed" and failed.reason == "tool_error"


def test_model_calls_inside_steps_are_children_with_tokens_and_cost():
    """A model call inside a step is a child of the step's node with its usage."""
    from tests.model_jobs import chat_job

    result = chat_job()
    graph = result.graph
    step = graph.find(kind="step")[0]
    (call,) = graph.children(step.id)
    assert call.kind == "model_call" and call.name == "gpt-4o-mini"
    assert call.input_tokens > 0 and call.cost_usd > 0
    assert step.cost_usd == pytest.approx(call.cost_usd)


def test_client_inside_a_step_parents_under_the_invocation_and_counts_usage():
    """A tracing Client used inside a step records its calls on the invocation too."""
    from tests.model_jobs import client_job

    result = client_job()
    inv = result.invocations[0]
    assert inv.calls == 2 and inv.cost_usd > 0
