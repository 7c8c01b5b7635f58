"""OpenTelemetry export of finished jobs (``fxtr.telemetry``, ``--fxtr-otel``; DESIGN §16).

Unit tests read the spans with the SDK's in-memory exporter; the integration test runs an
eval under pytest against an OTLP/HTTP receiver on 127.0.0.1 that decodes the protobuf.
"""

from __future__ import annotations

import gzip
import http.server
import json
import logging
import shutil
import socket
import threading
from pathlib import Path
from typing import Annotated, Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra: pip install -e '.[otel]'")

from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

from fxtr import (
    Array,
    ArrayHandle,
    BoundID,
    Entity,
    ScalarHandle,
    StepContext,
    WorkflowContext,
    run,
    step,
    workflow,
)
from fxtr.agents import Agent, tool, tool_call
from fxtr.evals import Case, Model, evaluate, includes, register_mock, user_text
from fxtr.models import ModelRequest, ToolCall, ToolMessage, ToolResult, UserMessage
from fxtr.models._types import ContentText
from fxtr.store import open_store
from fxtr.telemetry import CAPTURE_CONTENT_VARIABLE, export_jobs

ROOT = Path(__file__).parent.parent
SECRET = "sk-proj-telemetrytestkey0123456789abcdefXYZ"

ANSWERS = {"one": "The answer is 1.", "two": "The answer is 3.", "three": "The answer is 3."}
SUBJECT = register_mock("otel-subject", lambda r: ANSWERS[user_text(r).split()[-1]])


def _cases() -> list[Case]:
    return [Case(id=w, input=f"Say {w}", target=str(n)) for n, w in ((1, "one"), (2, "two"))]


def _inputs(samples: int = 1) -> dict[str, Any]:
    cases = _cases()
    return {
        "model": Array.from_mapping({SUBJECT.name: SUBJECT}, dims=["model"], value_type=Model),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"], value_type=Case),
        "scorer": includes(),
        "samples": samples,
    }


def _spans(store: str, job_id: str, **kwargs: Any) -> list[Any]:
    exporter = InMemorySpanExporter()
    outcome = export_jobs(open_store(store), [job_id], exporter=exporter, **kwargs)
    assert outcome.ok, outcome.error
    spans = list(exporter.get_finished_spans())
    assert outcome.spans == len(spans) and outcome.jobs == 1
    return spans


def _by_address(spans: list[Any]) -> dict[str, Any]:
    return {s.attributes["fxtr.address"]: s for s in spans if "fxtr.address" in s.attributes}


def test_a_kit_job_is_a_trace_of_steps_model_calls_and_scores(tmp_path):
    result = run(evaluate, _inputs(samples=2), store=str(tmp_path))
    assert result.status == "succeeded"
    spans = _spans(str(tmp_path), result.job_id)
    (job,) = [s for s in spans if s.parent is None]
    assert job.name == "job fxtr.evaluate"
    assert job.attributes["fxtr.job_id"] == result.job_id
    assert job.attributes["fxtr.status"] == "succeeded"
    assert {s.context.trace_id for s in spans} == {job.context.trace_id}
    steps = _by_address(spans)
    assert set(steps) == {inv.address for inv in result.invocations}  # one span each
    for inv in result.invocations:
        span = steps[inv.address]
        assert span.parent.span_id == job.context.span_id
        assert span.name == inv.step
        assert span.attributes["fxtr.status"] == "succeeded"
        assert span.attributes["fxtr.cached"] is False
        assert "fxtr.reason" not in span.attributes
        assert span.start_time <= span.end_time
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 4  # 2 cases x 2 samples, one call per generate
    generate_ids = {s.context.span_id for s in steps.values() if s.name == "fxtr.generate"}
    record = open_store(str(tmp_path)).job_invocations(result.job_id)
    for chat in chats:
        assert chat.name == "chat otel-subject"
        assert chat.parent.span_id in generate_ids
        a = chat.attributes
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "mock"
        assert a["gen_ai.request.model"] == "otel-subject"
        assert tuple(a["gen_ai.response.finish_reasons"]) == ("stop",)
        assert "gen_ai.input.messages" not in a and "gen_ai.output.messages" not in a
    step_of = {s.context.span_id: s.attributes["fxtr.address"] for s in steps.values()}
    for chat in chats:  # the tokens are the record's, call by call
        (call,) = record[step_of[chat.parent.span_id]]["model_calls"]
        assert chat.attributes["gen_ai.usage.input_tokens"] == call["input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] == call["output_tokens"] > 0
        assert chat.start_time == int(call["started_at"] * 1e9)
    events = {a: s.events for a, s in steps.items() if s.name == "fxtr.score"}
    assert len(events) == 4
    values = {}
    for address, (event,) in events.items():
        assert event.name == "gen_ai.evaluation.result"
        assert event.attributes["gen_ai.evaluation.name"] == "includes"
        values[address] = event.attributes["gen_ai.evaluation.score.value"]
        label = "pass" if values[address] >= 0.5 else "fail"
        assert event.attributes["gen_ai.evaluation.score.label"] == label
    expected = {  # "two" is answered 3: wrong, both samples
        inv.address: (0.0 if "case=two" in inv.address else 1.0)
        for inv in result.invocations
        if inv.step == "fxtr.score"
    }
    assert values == expected


def test_message_contents_only_with_the_capture_variable_and_never_a_key(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    leaky = register_mock("otel-leaky", lambda r: f"my key is {SECRET}")
    inputs = {**_inputs(), "model": Array.from_mapping({leaky.name: leaky}, dims=["model"])}
    result = run(evaluate, inputs, store=str(tmp_path))
    quiet = _spans(str(tmp_path), result.job_id)
    assert not any("gen_ai.input.messages" in s.attributes for s in quiet)
    monkeypatch.setenv(CAPTURE_CONTENT_VARIABLE, "true")
    spans = _spans(str(tmp_path), result.job_id)
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert chats
    for chat in chats:
        messages = json.loads(chat.attributes["gen_ai.input.messages"])
        assert messages[-1]["role"] == "user"
        assert messages[-1]["parts"][0]["content"].startswith("Say ")
        (output,) = json.loads(chat.attributes["gen_ai.output.messages"])
        assert output["role"] == "assistant" and output["finish_reason"] == "stop"
        assert "[redacted]" in output["parts"][0]["content"]
    everything = json.dumps(
        [[dict(s.attributes), [dict(e.attributes) for e in s.events]] for s in spans], default=str
    )
    assert SECRET not in everything and SECRET[len("sk-proj-") :] not in everything


def test_cached_invocations_keep_their_original_timings_and_calls(tmp_path):
    first = run(evaluate, _inputs(), store=str(tmp_path))
    second = run(evaluate, _inputs(), store=str(tmp_path))
    assert all(inv.from_cache for inv in second.invocations)
    before = _spans(str(tmp_path), first.job_id)
    after = _spans(str(tmp_path), second.job_id)
    old, new = _by_address(before), _by_address(after)
    assert set(old) == set(new)
    for address, span in new.items():
        assert span.attributes["fxtr.cached"] is True
        assert (span.start_time, span.end_time) == (old[address].start_time, old[address].end_time)
    old_chats = sorted((s.start_time, s.end_time) for s in before if s.name.startswith("chat "))
    new_chats = [s for s in after if s.name.startswith("chat ")]
    assert sorted((s.start_time, s.end_time) for s in new_chats) == old_chats
    assert all(s.attributes["fxtr.cached"] is True for s in new_chats)
    assert {s.context.trace_id for s in before}.isdisjoint({s.context.trace_id for s in after})


@step(name="otel.flaky")
async def flaky(context: StepContext, case: str) -> str:
    if case == "bad":
        msg = "no such row"
        raise LookupError(msg)
    return case.upper()


@workflow(name="otel.fails")
async def fails(
    context: WorkflowContext, case: Annotated[ArrayHandle[str], "[case: str]"]
) -> Annotated[ArrayHandle[str], "[case: str]"]:
    return context.run_step("flaky", flaky, {"case": case}, map_over=["case"])


def test_a_failed_invocation_is_an_error_span_with_its_reason(tmp_path):
    cases = Array.from_mapping({"ok": "ok", "bad": "bad"}, dims=["case"], value_type=str)
    result = run(fails, {"case": cases}, store=str(tmp_path))
    assert result.status == "failed"
    spans = _by_address(_spans(str(tmp_path), result.job_id))
    bad = spans["otel.fails/flaky[case=bad]"]
    assert bad.status.status_code is StatusCode.ERROR
    assert "LookupError: no such row" in bad.status.description
    assert bad.attributes["fxtr.status"] == "failed"
    assert bad.attributes["fxtr.reason"] == "tool_error"
    assert bad.attributes["error.type"] == "tool_error"
    ok = spans["otel.fails/flaky[case=ok]"]
    assert ok.status.status_code is StatusCode.UNSET and "fxtr.reason" not in ok.attributes


# --- an agent trajectory, recognised from the shape fxtr.agents records (DESIGN §12) --------

BOT = register_mock("otel-bot", "Let me look that up.")


class Outcome(Entity):
    result: ToolResult


def lookup(city: str) -> str:
    if city == "Atlantis":
        msg = "unknown city"
        raise KeyError(msg)
    return f"{city}: sunny"


@step(name="otel.turn")
async def turn(context: StepContext, model: Model, question: str) -> str:
    request = ModelRequest(context=(UserMessage(content=(ContentText(text=question),)),))
    return (await model.api().generate(request)).text


@step(name="otel.tool")
async def tool_step(context: StepContext, call: ToolCall) -> Outcome:
    try:
        return Outcome(result=ToolResult(tool_call_id=call.id, content=lookup(**call.arguments)))
    except KeyError as exc:
        content = f"KeyError: {exc}"
        return Outcome(result=ToolResult(tool_call_id=call.id, content=content, is_error=True))


@workflow(name="otel.agent")
async def agent(
    context: WorkflowContext, model: ScalarHandle[BoundID[Model]], case: ScalarHandle[str]
) -> ScalarHandle[Outcome]:
    city = await case.item()
    context.run_step("turn[0]", turn, {"model": model, "question": case})
    call = ToolCall(id="call_0_0", name="lookup", arguments={"city": city})
    return context.run_step("tool[0,0]", tool_step, {"call": Array.scalar(call, ToolCall)})


@workflow(name="otel.agents")
async def agents(
    context: WorkflowContext,
    model: ScalarHandle[BoundID[Model]],
    case: Annotated[ArrayHandle[str], "[case: str]"],
) -> Annotated[ArrayHandle[Outcome], "[case: str]"]:
    return context.run_child_workflow(
        "agent", agent, {"model": model, "case": case}, map_over=["case"]
    )


def test_agent_trajectories_are_invoke_agent_spans_with_chat_and_execute_tool(
    tmp_path, monkeypatch
):
    cities = Array.from_mapping({"paris": "Paris", "atl": "Atlantis"}, dims=["case"])
    result = run(agents, {"model": BOT, "case": cities}, store=str(tmp_path))
    assert result.status == "succeeded"
    monkeypatch.setenv(CAPTURE_CONTENT_VARIABLE, "true")
    spans = _spans(str(tmp_path), result.job_id)
    (job,) = [s for s in spans if s.parent is None]
    by_id = {s.context.span_id: s for s in spans}
    trajectories = [s for s in spans if s.name == "invoke_agent"]
    assert len(trajectories) == 2
    for t in trajectories:
        assert t.parent.span_id == job.context.span_id
        assert t.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert t.attributes["gen_ai.request.model"] == "otel-bot"
        assert t.attributes["fxtr.address"].startswith("otel.agents/agent[case=")
    tools = {s.attributes["fxtr.address"]: s for s in spans if s.name.startswith("execute_tool")}
    assert set(tools) == {
        "otel.agents/agent[case=paris]/tool[0,0]",
        "otel.agents/agent[case=atl]/tool[0,0]",
    }
    for address, span in tools.items():
        assert span.name == "execute_tool lookup"
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["gen_ai.tool.name"] == "lookup"
        assert span.attributes["gen_ai.tool.call.id"] == "call_0_0"
        assert by_id[span.parent.span_id].name == "invoke_agent"
        assert by_id[span.parent.span_id].attributes["fxtr.address"] in address
    atl = tools["otel.agents/agent[case=atl]/tool[0,0]"]
    assert atl.attributes["error.type"] == "tool_error"
    assert "unknown city" in atl.attributes["gen_ai.tool.call.result"]
    assert json.loads(atl.attributes["gen_ai.tool.call.arguments"]) == {"city": "Atlantis"}
    paris = tools["otel.agents/agent[case=paris]/tool[0,0]"]
    assert "error.type" not in paris.attributes
    chats = [s for s in spans if s.name == "chat otel-bot"]
    assert len(chats) == 2
    for chat in chats:
        turn_span = by_id[chat.parent.span_id]
        assert turn_span.attributes["fxtr.address"].endswith("/turn[0]")
        assert by_id[turn_span.parent.span_id].name == "invoke_agent"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_collector_costs_one_warning(tmp_path, monkeypatch, caplog, capfd):
    result = run(evaluate, _inputs(), store=str(tmp_path))
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    with caplog.at_level(logging.DEBUG):
        outcome = export_jobs(open_store(str(tmp_path)), [result.job_id, result.job_id])
    assert not outcome.ok and outcome.spans == 0 and outcome.jobs == 0
    assert f"{endpoint}/v1/traces" in outcome.error
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in outcome.error
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in warnings] == ["fxtr.telemetry"]  # the exporter's own are folded in
    out, err = capfd.readouterr()
    assert "Failed to export" not in out + err


# --- the integration: pytest --fxtr-otel against an OTLP/HTTP receiver ---------------------


class _Receiver(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[Any] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        assert self.headers["Content-Type"] == "application/x-protobuf"
        self.server.paths.append(self.path)
        self.server.headers.append({k.lower(): v for k, v in self.headers.items()})
        self.server.requests.append(trace_service_pb2.ExportTraceServiceRequest.FromString(body))
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver():
    pytest.importorskip("opentelemetry.proto")
    server = _Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind)


def _decoded(requests: list[Any]) -> list[dict[str, Any]]:
    spans = []
    for request in requests:
        for rs in request.resource_spans:
            resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    spans.append(
                        {
                            "name": s.name,
                            "trace_id": s.trace_id.hex(),
                            "span_id": s.span_id.hex(),
                            "parent": s.parent_span_id.hex() or None,
                            "attributes": {kv.key: _value(kv.value) for kv in s.attributes},
                            "events": [
                                (e.name, {kv.key: _value(kv.value) for kv in e.attributes})
                                for e in s.events
                            ],
                            "scope": ss.scope.name,
                            "service": resource.get("service.name"),
                            "start": s.start_time_unix_nano,
                            "end": s.end_time_unix_nano,
                        }
                    )
    return spans


@pytest.fixture
def project(pytester):
    (pytester.path / "evals" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "evals" / "test_capitals.py", pytester.path / "evals")
    shutil.copy(ROOT / "evals" / "data" / "capitals.jsonl", pytester.path / "evals" / "data")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def test_pytest_exports_the_run_to_an_otlp_http_collector(project, receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{receiver.server_port}")
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    result = project.runpytest(
        "evals/", "-p", "no:cacheprovider", "--fxtr-otel", "--fxtr-report", "report.json"
    )
    result.assert_outcomes(passed=16)
    assert "OpenTelemetry" not in result.stdout.str()
    assert receiver.paths and set(receiver.paths) == {"/v1/traces"}
    spans = _decoded(receiver.requests)
    (report,) = json.loads((project.path / "report.json").read_text())["jobs"]
    assert {s["service"] for s in spans} == {"fxtr"} and {s["scope"] for s in spans} == {"fxtr"}
    (job,) = [s for s in spans if s["parent"] is None]
    assert job["name"] == "job evals/test_capitals.py::test_capitals"
    assert job["attributes"]["fxtr.job_id"] == report["job_id"]
    assert job["attributes"]["fxtr.gate.passed"] is True
    assert {s["trace_id"] for s in spans} == {job["trace_id"]}
    ids = {s["span_id"]: s for s in spans}
    assert len(ids) == len(spans)
    steps = {s["attributes"]["fxtr.address"]: s for s in spans if "fxtr.address" in s["attributes"]}
    assert set(steps) == {i["address"] for i in report["invocations"]}
    for inv in report["invocations"]:
        span = steps[inv["address"]]
        assert span["parent"] == job["span_id"]
        assert span["name"] == inv["step"]
        assert span["attributes"]["fxtr.status"] == inv["status"]
        assert span["attributes"]["fxtr.cached"] is inv["from_cache"] is False
    chats = [s for s in spans if s["name"].startswith("chat ")]
    assert len(chats) == report["cost"]["calls"] == 96
    for chat in chats:
        parent = ids[chat["parent"]]
        assert parent["name"] in ("fxtr.generate", "fxtr.score")
        role = chat["attributes"]["fxtr.role"]
        assert role == ("subject" if parent["name"] == "fxtr.generate" else "judge")
    for key in ("input_tokens", "output_tokens"):
        total = sum(c["attributes"][f"gen_ai.usage.{key}"] for c in chats)
        assert total == report["cost"][key] > 0
        for model, row in report["cost"]["by_model"].items():
            mine = [c for c in chats if c["attributes"]["gen_ai.request.model"] == model]
            assert len(mine) == row["calls"]
            assert sum(c["attributes"][f"gen_ai.usage.{key}"] for c in mine) == row[key]
    events = [e for s in spans for e in s["events"]]
    assert len(events) == 2 * 8 * 3
    assert {name for name, _ in events} == {"gen_ai.evaluation.result"}
    assert {a["gen_ai.evaluation.name"] for _, a in events} == {"model_graded_fact"}
    means = {}
    for s in spans:
        for _, attributes in s["events"]:
            model = s["attributes"]["fxtr.address"].split('model="', 1)[1].split('"', 1)[0]
            means.setdefault(model, []).append(attributes["gen_ai.evaluation.score.value"])
            value = attributes["gen_ai.evaluation.score.value"]
            assert attributes["gen_ai.evaluation.score.label"] == (
                "pass" if value >= 0.8 else "fail"
            )
    assert {m: sum(v) / len(v) for m, v in means.items()} == {
        g["group"]["model"]: g["mean"] for g in report["scores"]
    }


def test_pytest_with_an_unreachable_collector_warns_once_and_passes(project, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    result = project.runpytest("evals/", "-p", "no:cacheprovider", "--fxtr-otel")
    assert result.ret == 0
    result.assert_outcomes(passed=16)
    lines = [line for line in result.outlines + result.errlines if "OpenTelemetry" in line]
    assert len(lines) == 1, lines
    assert "fxtr: warning: the OpenTelemetry export to http://127.0.0.1:" in lines[0]


def test_the_ini_twin_turns_the_export_on(project, receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{receiver.server_port}")
    project.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\nfxtr_otel = true\n")
    project.runpytest("evals/", "-p", "no:cacheprovider", "-k", "france").assert_outcomes(passed=2)
    assert any(s["name"].startswith("job ") for s in _decoded(receiver.requests))


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def _calculator(request):  # call add, then answer with its result
    if isinstance(request.context[-1], ToolMessage):
        return "It is " + request.context[-1].results[0].content
    a, b = map(float, user_text(request).split("+"))
    return tool_call("add", a=a, b=b)


CALC = register_mock("otel-calc", _calculator)


def test_a_real_agent_eval_exports_its_trajectories(tmp_path):
    model = CALC
    cases = [Case(id="small", input="2+3", target="5"), Case(id="big", input="40+2", target="42")]
    inputs = {
        "model": Array.from_mapping({model.name: model}, dims=["model"], value_type=Model),
        "case": Array.from_mapping({c.id: c for c in cases}, dims=["case"], value_type=Case),
        "scorer": includes(),
        "agent": Agent(tools=(add,)),
    }
    result = run(evaluate, inputs, store=str(tmp_path))
    assert result.status == "succeeded"
    spans = _spans(str(tmp_path), result.job_id)
    by_id = {s.context.span_id: s for s in spans}
    trajectories = [s for s in spans if s.name == "invoke_agent"]
    assert len(trajectories) == 2
    assert {t.attributes["fxtr.workflow"] for t in trajectories} == {"fxtr.agent"}
    assert {t.attributes["gen_ai.request.model"] for t in trajectories} == {"otel-calc"}
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    assert [s.name for s in tools] == ["execute_tool add"] * 2
    for span in tools:
        assert span.attributes["gen_ai.tool.name"] == "add"
        assert span.attributes["gen_ai.tool.call.id"]
        assert by_id[span.parent.span_id].name == "invoke_agent"
    chats = [s for s in spans if s.name == "chat otel-calc"]
    assert len(chats) == 4  # two turns per trajectory: the call, then the answer
    for chat in chats:
        turn_span = by_id[chat.parent.span_id]
        assert turn_span.attributes["fxtr.address"].rsplit("/", 1)[1] in ("turn[0]", "turn[1]")
        assert by_id[turn_span.parent.span_id].name == "invoke_agent"
    events = [e for s in spans for e in s.events]
    assert [e.attributes["gen_ai.evaluation.score.value"] for e in events] == [1.0, 1.0]
    assert {e.attributes["gen_ai.evaluation.name"] for e in events} == {"includes"}


# --- the bulk-built OTLP requests are the SDK's encoding of the same spans ------------------


def _jobs_of_every_shape(store: str) -> list[str]:
    """Jobs with model calls and scores (twice: computed, then all cached), a failure, and
    agent trajectories with tool calls, a tool error and their model calls."""
    kit = run(evaluate, _inputs(samples=2), store=store)
    cached = run(evaluate, _inputs(samples=2), store=store)
    cases = Array.from_mapping({"ok": "ok", "bad": "bad"}, dims=["case"], value_type=str)
    failed = run(fails, {"case": cases}, store=store)
    cities = Array.from_mapping({"paris": "Paris", "atl": "Atlantis"}, dims=["case"])
    trajectories = run(agents, {"model": BOT, "case": cities}, store=store)
    assert failed.status == "failed" and all(i.from_cache for i in cached.invocations)
    return [kit.job_id, cached.job_id, failed.job_id, trajectories.job_id]


def _renumbered(requests: list[Any]) -> list[Any]:
    """Copies of OTLP requests with each span id replaced by the span's position (span ids
    are random per export; parents before children, the same order both ways)."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    copies = [
        trace_service_pb2.ExportTraceServiceRequest.FromString(r.SerializeToString())
        for r in requests
    ]
    spans = [
        s for r in copies for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans
    ]
    position = {s.span_id: i.to_bytes(8, "big") for i, s in enumerate(spans)}
    assert len(position) == len(spans)  # the ids were distinct
    for s in spans:
        s.span_id = position[s.span_id]
        if s.parent_span_id:
            s.parent_span_id = position[s.parent_span_id]
    return copies


def test_bulk_requests_equal_the_sdk_encoding_of_the_spans(tmp_path, monkeypatch):
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from fxtr.report._otel import job_requests
    from fxtr.telemetry import job_spans

    monkeypatch.setenv(CAPTURE_CONTENT_VARIABLE, "true")  # messages, tool arguments and results
    store = open_store(str(tmp_path))
    for job_id in _jobs_of_every_shape(str(tmp_path)):
        spans = job_spans(store, job_id)
        for batch in (3, 10_000):  # a request per 3 spans, and the whole job in one
            sdk = [encode_spans(spans[i : i + batch]) for i in range(0, len(spans), batch)]
            ours = job_requests(store, job_id, batch=batch)
            assert len(ours) == len(sdk) == -(-len(spans) // batch)
            assert _renumbered(ours) == _renumbered(sdk)


def test_the_sdk_exporter_takes_fxtr_s_encoded_requests():
    """The default export hands its own requests to the SDK exporter's HTTP client: with the
    SDK fxtr is tested against, the bulk path is the one taken (not the slow fallback)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from fxtr.telemetry import _http_client

    exporter = OTLPSpanExporter(endpoint="http://127.0.0.1:9/v1/traces")
    assert _http_client(exporter) is not None

    class Own(OTLPSpanExporter):  # a subclass may change export: it gets ReadableSpans
        pass

    assert _http_client(Own(endpoint="http://127.0.0.1:9/v1/traces")) is None
    exporter.shutdown()
    assert _http_client(exporter) is None


def test_the_collector_receives_the_same_spans_from_the_bulk_and_the_sdk_path(
    tmp_path, receiver, monkeypatch
):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    class SdkEncoded(OTLPSpanExporter):  # not the exact class: fxtr leaves encoding to the SDK
        pass

    endpoint = f"http://127.0.0.1:{receiver.server_port}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    store = open_store(str(tmp_path))
    jobs = _jobs_of_every_shape(str(tmp_path))
    bulk = export_jobs(store, jobs)
    assert bulk.ok and bulk.jobs == 4
    received = list(receiver.requests)
    receiver.requests.clear()
    exporter = SdkEncoded(endpoint=f"{endpoint}/v1/traces")
    sdk = export_jobs(store, jobs, exporter=exporter)
    exporter.shutdown()
    assert sdk.ok and sdk.spans == bulk.spans == len(_decoded(received))
    assert _renumbered(received) == _renumbered(receiver.requests)
    spans = _decoded(received)
    names = {s["name"] for s in spans}
    assert {"invoke_agent", "execute_tool lookup", "chat otel-bot", "chat otel-subject"} <= names
    assert any(s["events"] for s in spans)
    assert any(s["attributes"].get("fxtr.status") == "failed" for s in spans)


def test_bulk_encoding_of_values_that_compare_equal_across_types():
    """1, True and 1.0 are equal (and hash alike) in Python but three OTLP values; a list is
    not hashable; an error status keeps its message."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event
    from opentelemetry.trace import SpanKind, Status

    from fxtr.report._otel import _ReadableSpans, _Requests

    resource = Resource({"service.name": "fxtr-test"})
    sdk, ours = _ReadableSpans(7, resource), _Requests(7, resource, batch=100)
    values = [1, True, 1.0, 0, False, 0.0, "1", ("a", "b"), ["a", "b"], ["a", "b"], b"x"]
    for i, value in enumerate(values):
        for sink in (sdk, ours):
            sink.span(
                f"s{i}",
                i + 1,
                None if i == 0 else 1,
                {"k": value, "n": i},
                10 * i,
                None,
                SpanKind.CLIENT if i % 2 else SpanKind.INTERNAL,
                Status(StatusCode.ERROR, f"broke {i}") if i % 3 == 0 else None,
                [Event("e", {"k": value}, 5)] if i % 4 == 0 else [],
            )
    assert ours.requests == [encode_spans(sdk.spans)]


def test_the_bulk_path_keeps_the_exporter_s_headers_compression_and_endpoint(
    tmp_path, receiver, monkeypatch
):
    result = run(evaluate, _inputs(), store=str(tmp_path))
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{receiver.server_port}/traces"
    )
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=evals,x-scope=fxtr")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    outcome = export_jobs(open_store(str(tmp_path)), [result.job_id])
    assert outcome.ok and outcome.spans == len(_decoded(receiver.requests)) > 0
    assert set(receiver.paths) == {"/traces"}
    for headers in receiver.headers:
        assert headers["x-team"] == "evals" and headers["x-scope"] == "fxtr"
        assert headers["content-encoding"] == "gzip"
